"""``python -m tidu.cli``: the command line."""

import sys

from tidu.cli.main import main

sys.exit(main())
