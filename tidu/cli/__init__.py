"""The ``tidu`` command line: ``tidu diff``, ``hessian``, ``lower``, ``equal`` and
``check-rules`` (``main``), their argument parsers (``parse_at``, ``parse_mode``) and
the one-line errors they report (``CliError``)."""

from tidu.cli.errors import CliError
from tidu.cli.main import COMMANDS, build_parser, main, parse_assume, parse_at, parse_mode

__all__ = ["COMMANDS", "CliError", "build_parser", "main", "parse_assume", "parse_at", "parse_mode"]
