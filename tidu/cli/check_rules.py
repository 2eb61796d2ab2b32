"""The ``tidu check-rules`` subcommand: ``setup_cli`` and ``run_cli``, registered in
``tidu.cli.COMMANDS``. Bad input raises ``CliError`` (``tidu.cli.errors``; exit status 2)."""

from __future__ import annotations

import argparse
from importlib import resources

from tidu.checkrules import PASS, SYMPY_TIMEOUT, Report, check_rules, mutation_summary, run_mutants
from tidu.cli.errors import CliError


def setup_cli(parser: argparse.ArgumentParser) -> None:
    """Add the ``check-rules`` options to ``parser`` (the CLI's sub-command)."""
    parser.add_argument("files", nargs="*", metavar="FILES",
                        help="extra rule files, loaded with the built-ins; their rules are checked")
    parser.add_argument("--all", action="store_true", help="with FILES, check the built-in rules too")
    parser.add_argument("--replace", metavar="DIR",
                        help="check the catalog of DIR's *.rules files (e.g. an edited copy of rules/) instead of "
                             "the built-in one, every rule of it")
    parser.add_argument("--only", metavar="PRIMS", help="only these primitives (comma-separated)")
    parser.add_argument("--failures", action="store_true", help="print only the rows that did not pass")
    parser.add_argument("--mutate", action="store_true",
                        help="mutation testing: check single-line mutants of the catalog (the built-in one, or "
                             "--replace DIR) and list the ones the checker does not refuse")
    parser.add_argument("--sample", type=int, metavar="N", help="with --mutate, a seeded sample of N mutants")
    parser.add_argument("--seed", type=int, default=0, help="with --mutate --sample, the sample's seed (default 0)")
    parser.add_argument("--sympy-timeout", type=float, default=SYMPY_TIMEOUT, metavar="S",
                        help=f"seconds SymPy may spend on one symbolic comparison; past them the verdict is '?' and "
                             f"the numeric checks decide (default {SYMPY_TIMEOUT:g}; 0: no bound)")


def run_cli(args: argparse.Namespace) -> int:
    """Print the table; exit 1 if a check failed (bad input raises the CLI's error: exit 2)."""
    if args.mutate:
        return _run_mutants(args)
    only = [s.strip() for s in args.only.split(",") if s.strip()] if args.only is not None else None
    if only == []:  # an empty list would check every rule, the opposite of what was asked
        raise CliError(f"--only: no primitive names in {args.only!r} (give e.g. --only mul,exp)")
    if not args.sympy_timeout >= 0:
        raise CliError(f"--sympy-timeout must be 0 (no bound) or positive seconds, got {args.sympy_timeout:g}")
    try:
        report = check_rules(args.files, include_builtin_rules=args.all or None, only=only, replace=args.replace,
                             sympy_timeout=args.sympy_timeout or None)
    except UnicodeDecodeError as e:
        raise CliError(f"a rule file is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except (FileNotFoundError, ValueError) as e:  # RuleSyntaxError is a ValueError
        raise CliError(str(e)) from None
    shown = Report([r for r in report.rows if r.result != PASS]) if args.failures else report
    print(shown.table() + "\n\n" + report.summary())
    return 0 if report.ok else 1


def _run_mutants(args: argparse.Namespace) -> int:

    if args.files or args.only is not None:
        raise CliError("--mutate checks a whole catalog: give it --replace DIR (or nothing, for the built-in rules), "
                       "not rule files or --only")
    if args.sample is not None and args.sample < 1:
        raise CliError("--sample must be at least 1")
    directory = args.replace or _rules_dir()
    try:
        outcomes = run_mutants(directory, args.sample, args.seed)
    except (FileNotFoundError, ValueError) as e:
        raise CliError(str(e)) from None
    shown = [o for o in outcomes if o.verdict == "survived" or (o.verdict == "equivalent" and not args.failures)]
    for o in shown:
        m = o.mutant
        print(f"{o.verdict:10s} {m.file}:{m.line} {m.operator:10s} {m.before} => {m.after}"
              + (f"  ({o.detail})" if o.detail else ""))
    print(("\n" if shown else "") + mutation_summary(outcomes))
    return 1 if any(o.verdict == "survived" for o in outcomes) else 0


def _rules_dir() -> str:
    """The directory of the built-in rule files (the installed package ``tidu.rules``)."""
    return str(resources.files("tidu.rules"))
