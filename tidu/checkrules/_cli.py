"""The ``tidu check-rules`` subcommand: ``setup_cli`` and ``run_cli``, registered in
``tidu.cli.COMMANDS``. Bad input raises ``CliError`` (``tidu.clierror``; exit status 2)."""

from __future__ import annotations

import argparse

from ..clierror import CliError
from ._driver import check_rules
from ._report import PASS, Report


def setup_cli(parser: argparse.ArgumentParser) -> None:
    """Add the ``check-rules`` options to ``parser`` (the CLI's sub-command)."""
    parser.add_argument("files", nargs="*", metavar="FILES",
                        help="extra rule files, loaded with the built-ins; their rules are checked")
    parser.add_argument("--all", action="store_true", help="with FILES, check the built-in rules too")
    parser.add_argument("--only", metavar="PRIMS", help="only these primitives (comma-separated)")
    parser.add_argument("--failures", action="store_true", help="print only the rows that did not pass")


def run_cli(args: argparse.Namespace) -> int:
    """Print the table; exit 1 if a check failed (bad input raises the CLI's error: exit 2)."""
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only else None
    try:
        report = check_rules(args.files, include_builtin_rules=args.all or None, only=only)
    except UnicodeDecodeError as e:
        raise CliError(f"a rule file is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except (FileNotFoundError, ValueError) as e:  # RuleSyntaxError is a ValueError
        raise CliError(str(e)) from None
    shown = Report([r for r in report.rows if r.result != PASS]) if args.failures else report
    print(shown.table() + "\n\n" + report.summary())
    return 0 if report.ok else 1
