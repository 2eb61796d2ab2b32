"""``python -m tidu``: the command line (the same as the ``tidu`` program)."""

import sys

from tidu.cli import main

if __name__ == "__main__":
    sys.exit(main())
