"""``check_rules``: each rule of the rule files through its checks, with the catalog that
declares it active (``tidu.ops.catalog.use_catalog``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tidu.checkrules._batching import check_batching
from tidu.checkrules._eval import NoSemantics, implementations
from tidu.checkrules._numeric import check_jvp, check_transpose
from tidu.checkrules._report import EXEMPT, FAIL, SKIP, WARN, Report, Row, _where
from tidu.checkrules._rewrites import check_rewrite
from tidu.checkrules._sympy import SYMPY_TIMEOUT, sympy_bound
from tidu.checkrules._taylor import check_taylor, has_taylor_rule
from tidu.core.progress import step, steps
from tidu.ops import catalog as _primitives
from tidu.ops.dsl.ast import Call, show


def _guarded(row_fn: Callable[[], list[Row]], prim: str, rule: str, where: str, *checks: str,
             exempt: str | None = None) -> list[Row]:
    """Run the checks of one rule; a rule that makes the engine fail fails its checks. An
    unconfirmed check (warn, skip) of a rule with an ``exempt`` reason is "exempt"."""
    step(where)
    try:
        rows = row_fn()
    except NoSemantics as e:
        rows = [Row(prim, rule, where, c, SKIP, str(e)) for c in checks]
    except Exception as e:  # noqa: BLE001 (any error in a rule under check is its failure)
        rows = [Row(prim, rule, where, c, FAIL, f"{type(e).__name__}: {e}") for c in checks]
    if exempt:
        for r in rows:
            if r.result in (WARN, SKIP):
                r.result, r.detail = EXEMPT, f"exempt: {exempt} ({r.result}: {r.detail})"
    return rows


def replacement_files(directory: str | Path) -> list[str]:
    """The ``*.rules`` files of ``directory`` (sorted), or a clear error."""
    d = Path(directory)
    if not d.is_dir():
        raise FileNotFoundError(f"--replace takes a directory of .rules files; {d} is not a directory")
    files = sorted(str(f) for f in d.glob("*.rules"))
    if not files:
        raise FileNotFoundError(f"--replace: {d} has no .rules files")
    return files


def _jvp_rules(prim: _primitives.Primitive) -> list:
    """Every JVP rule of ``prim``: guarded alternatives (``when real(x)``) and the rest."""
    return [*(r for rules in prim.jvp_when.values() for r in rules), *prim.jvp.values()]


def check_rules(
    paths: Sequence[str | Path] | None = None,
    *,
    include_builtin_rules: bool | None = None,
    only: Sequence[str] | None = None,
    replace: str | Path | None = None,
    lines: set[tuple[str, int]] | None = None,
    sympy_timeout: float | None = SYMPY_TIMEOUT,
) -> Report:
    """Check the rules of the built-in rule files, or of ``paths`` (extra rule files,
    loaded together with the built-ins, whose primitives may use the built-in ones).
    ``include_builtin_rules`` (default: only when no paths are given) also checks the
    built-in rules; ``only`` restricts to those primitives. Raises ``RuleSyntaxError`` for
    a malformed file, ``FileNotFoundError`` for an unreadable one, ``ValueError`` for an
    unknown primitive in ``only``. ``replace``: a directory whose ``*.rules`` files are a
    whole catalog used instead of the built-in one (an edited copy of ``rules/``), every
    rule of it checked. ``lines``: only the rules written at these (file, line) places.
    ``sympy_timeout``: seconds SymPy may spend on one symbolic comparison (past it the
    verdict is "?" and the numeric checks decide; None: no bound)."""
    # a file named twice (check-rules my.rules ./my.rules) is one file, loaded once: not a
    # second declaration of each of its primitives
    seen: dict[Path, str] = {}
    for p in paths or []:
        seen.setdefault(Path(p).resolve(), str(p))
    paths = list(seen.values())
    if replace is not None:
        catalog_files = replacement_files(replace)
        cat = _primitives.load_rule_paths([*catalog_files, *paths], include_builtin=False)
        include_builtin_rules, paths = True, [*catalog_files, *paths]
    else:
        cat = _primitives.load_rule_paths(paths)
        # a built-in rule file named by its path (rules/fft.rules) is checked as loaded
        paths = [_primitives.shipped_path(p) or p for p in paths]
    unknown = sorted(set(only or ()) - set(cat))
    if unknown:
        raise ValueError(f"unknown primitive(s) {', '.join(unknown)}; known: {', '.join(sorted(cat))}")
    builtin = not paths if include_builtin_rules is None else include_builtin_rules
    files = set(cat.files) if builtin or replace is not None else set(paths)
    if lines is not None:
        files = {f for f in files if any(f == lf for lf, _ in lines)}

    def _at(loc: Any) -> bool:
        return lines is None or (loc.file, loc.line) in lines
    impls = implementations(cat)
    report = Report()
    steps(sum(1 for p in cat.values() if not only or p.name in only
              for r in (*_jvp_rules(p), *p.transpose.values()) if r.loc.file in files and _at(r.loc))
          + sum(1 for p in cat.values() if (not only or p.name in only) and lines is None and p.operands
                and p.loc.file in files)
          + sum(1 for p in cat.values() if (not only or p.name in only) and lines is None and has_taylor_rule(p)
                and p.loc.file in files)
          + sum(1 for rw in cat.all_rewrites()
                if rw.loc.file in files and _at(rw.loc)
                and (not only or (rw.lhs.fn if isinstance(rw.lhs, Call) else "?") in only)))
    with _primitives.use_catalog(cat), sympy_bound(sympy_timeout):
        for prim in cat.values():
            if only and prim.name not in only:
                continue
            for rule in _jvp_rules(prim):
                if rule.loc.file in files and _at(rule.loc):
                    name = f"jvp {rule.operand}" if rule.operand else "jvp"
                    report.rows += _guarded(lambda p=prim, r=rule: check_jvp(cat, p, r, impls), prim.name, name,
                                            _where(rule.loc), "derivative", "linear", exempt=rule.exempt)
            if lines is None and prim.operands and prim.loc.file in files:  # batching: from its type
                report.rows += _guarded(lambda p=prim: [check_batching(cat, p, impls)], prim.name, "batching",
                                        _where(prim.loc), "batched")
            if lines is None and has_taylor_rule(prim) and prim.loc.file in files:  # tidu.jet's recurrence
                report.rows += _guarded(lambda p=prim: [check_taylor(cat, p, impls)], prim.name,
                                        "jet (tidu/transforms/jet.py)", _where(prim.loc), "taylor")
            for rule in prim.transpose.values():
                if rule.loc.file in files and _at(rule.loc):
                    report.rows += _guarded(lambda p=prim, r=rule: [check_transpose(cat, p, r, impls)], prim.name,
                                            f"transpose {rule.operand}", _where(rule.loc), "adjoint",
                                            exempt=rule.exempt)
        for rw in cat.all_rewrites():
            op = rw.lhs.fn if isinstance(rw.lhs, Call) else "?"
            if rw.loc.file in files and _at(rw.loc) and (not only or op in only):
                report.rows += _guarded(lambda r=rw: [check_rewrite(cat, r, impls)], op, f"rewrite {show(rw.lhs)}",
                                        _where(rw.loc), "sound", exempt=rw.exempt)
    return report
