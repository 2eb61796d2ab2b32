"""``tidu check-rules``: the built-in rules pass every check; deliberately wrong rule files
(tests/bad_rules/) are caught at the right file:line, by the right check."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

import tidu.numpy as tnp
from tidu.checkrules import FAIL, PASS, SKIP, Report, check_rules
from tidu.checkrules._eval import implementations
from tidu.checkrules._taylor import check_taylor
from tidu.cli import main
from tidu.ops.catalog import catalog
from tidu.ops.dsl.ast import RuleSyntaxError
from tidu.transforms import jet

BAD = Path(__file__).parent / "bad_rules"


def where(name: str, needle: str) -> str:
    """``path:line`` of the first line of ``bad_rules/name`` that contains ``needle``."""
    path = BAD / name
    for i, line in enumerate(path.read_text().splitlines(), start=1):
        if needle in line:
            return f"{path}:{i}"
    raise AssertionError(f"{needle!r} not in {path}")


@pytest.fixture(scope="module")
def builtin() -> Report:
    return check_rules()


@pytest.mark.slow  # the whole catalog (~20 s); CI also runs `tidu check-rules` as its own step
def test_builtin_rules_pass(builtin: Report) -> None:
    assert builtin.ok, builtin.summary()
    assert {r.result for r in builtin.rows} == {PASS}  # nothing unconfirmed, nothing exempt


@pytest.mark.slow  # the whole catalog (~20 s); CI also runs `tidu check-rules` as its own step
def test_every_builtin_rule_has_its_checks(builtin: Report) -> None:
    expected = set()
    for prim in catalog().values():
        for rule in [*prim.jvp.values(), *(r for rs in prim.jvp_when.values() for r in rs)]:
            line = f"{rule.loc.file}:{rule.loc.line}"
            expected |= {(line, "derivative"), (line, "linear")}
        expected |= {(f"{r.loc.file}:{r.loc.line}", "adjoint") for r in prim.transpose.values()}
    expected |= {(f"{r.loc.file}:{r.loc.line}", "sound") for r in catalog().all_rewrites()}
    # and every primitive with operands its batching (vmap against the loop), at its declaration
    expected |= {(f"{p.loc.file}:{p.loc.line}", "batched") for p in catalog().values() if p.operands}
    # and every primitive with a Taylor rule (tidu.jet) that rule, at its declaration
    expected |= {(f"{p.loc.file}:{p.loc.line}", "taylor") for p in catalog().values() if p.name in jet.RULES}
    assert {(r.where, r.check) for r in builtin.rows} == expected
    assert len(builtin.rows) == len(expected)


@pytest.mark.slow  # the whole catalog (~20 s); CI also runs `tidu check-rules` as its own step
def test_builtin_checks_ran_symbolically_and_numerically(builtin: Report) -> None:
    rows = {(r.primitive, r.rule, r.check): r for r in builtin.rows}
    exp = rows["exp", "jvp", "derivative"].detail
    assert "sympy real: yes" in exp and "sympy complex: yes" in exp and "fd complex: max err" in exp
    assert "sympy: yes" in rows["mul", "jvp x", "linear"].detail
    assert rows["mul", "transpose x", "adjoint"].detail == "real ok; complex ok"
    assert "fd real" in rows["dot_general", "jvp lhs", "derivative"].detail  # no meaning: numeric only
    sound = [r for r in builtin.rows if r.check == "sound"]
    assert all("samples" in r.detail for r in sound)


@pytest.mark.slow  # the whole catalog (~20 s); CI also runs `tidu check-rules` as its own step
def test_sign_is_checked_per_dtype(builtin: Report) -> None:
    rows = {(r.rule, r.check): r for r in builtin.rows if r.primitive == "sign"}
    assert "fd real" in rows["jvp when real(x)", "derivative"].detail
    assert "complex" not in rows["jvp when real(x)", "derivative"].detail
    assert "fd complex" in rows["jvp", "derivative"].detail and "real" not in rows["jvp", "derivative"].detail


UNCONFIRMED = {
    # unsound: log(-1) is nan in float64 (mpmath's i*pi must not make them "exact")
    "rewrite exp(log(x)) -> x when real(x)": ("FAIL", "at x=-1: lhs nan, rhs -1"),
    "rewrite sqrt(x) * sqrt(x) -> x when real(x)": ("FAIL", "at x=-1: lhs nan, rhs -1"),
    # used to crash the checker (AttributeError on a complex exact value)
    "rewrite log(pow(x, y)) -> y * log(x)": ("FAIL", "lhs 0, rhs nan"),
    # right in the reals, refuted nowhere, but not confirmed in floating point: a failure
    "rewrite log(exp(x)) -> x when real(x)": ("warn", "the lhs overflows or rounds"),
}


@pytest.mark.parametrize("line", sorted(UNCONFIRMED))
def test_unconfirmed_rules_fail_the_run(tmp_path: Path, line: str, capsys) -> None:
    path = tmp_path / "user.rules"
    path.write_text(line + "\n")
    report = check_rules([path])
    (row,) = report.rows
    result, detail = UNCONFIRMED[line]
    assert row.result == result and detail in row.detail, row
    assert not report.ok
    assert main(["check-rules", str(path)]) == 1
    capsys.readouterr()


def test_exempt_rules_state_why(tmp_path: Path, capsys) -> None:
    path = tmp_path / "user.rules"
    path.write_text('rewrite log(exp(x)) -> x  when real(x)  exempt "exact in the reals; exp overflows past 709"\n')
    report = check_rules([path])
    assert report.ok and report.rows[0].result == "exempt"
    assert report.rows[0].detail.startswith("exempt: exact in the reals; exp overflows past 709 (warn:")
    # a counterexample cannot be exempted
    path.write_text('rewrite exp(log(x)) -> x  when real(x)  exempt "it holds for the positive reals"\n')
    assert check_rules([path]).rows[0].result == FAIL
    path.write_text('rewrite log(exp(x)) -> x  exempt "ok"\n')
    assert main(["check-rules", str(path)]) == 2
    assert "exempt needs a reason in quotes" in capsys.readouterr().err


def test_guarded_jvp_rules_need_an_unguarded_one(tmp_path: Path, capsys) -> None:
    path = tmp_path / "user.rules"
    path.write_text("primitive twice(x)\n    type elementwise\n    dtypes inexact\n    meaning 2*x\n"
                    "    jvp: 2 * dx when real(x)\n")
    assert main(["check-rules", str(path)]) == 2
    assert "needs an unguarded one" in capsys.readouterr().err
    path.write_text("primitive twice(x)\n    type elementwise\n    dtypes inexact\n    meaning 2*x\n"
                    "    jvp: 2 * dx when finite(x)\n    jvp: 2 * dx\n")
    assert main(["check-rules", str(path)]) == 2
    assert "can only be guarded by real" in capsys.readouterr().err


BAD_CASES = {
    "wrong_jvp.rules": {("jvp:       -cos(x) * dx", "derivative"), ("jvp y:     x * y * dy", "derivative")},
    "nonlinear_jvp.rules": {("jvp:       2 * x * dx + dx * dx", "derivative"),
                            ("jvp:       2 * x * dx + dx * dx", "linear")},
    "wrong_transpose.rules": {("transpose x: ct * y", "adjoint"), ("transpose x: 2 * ct", "adjoint")},
    "unsound_rewrite.rules": {("rewrite    x * 0 -> 0", "sound"), ("rewrite    log(exp(x)) -> x", "sound"),
                              ("rewrite    sqrt(x * x) -> x", "sound"), ("cube(-x) -> cube(x)", "sound")},
    "good_softplus.rules": set(),
    "select_of_tangents.rules": {("jvp:       select(", "derivative")},
    "unsound_real.rules": {("exp(log(x)) -> x", "sound"), ("sqrt(x) * sqrt(x) -> x", "sound"),
                           ("x + y -> x", "sound"), ("log(exp(x)) -> x", "sound")},
}


@functools.cache
def report_of(name: str) -> Report:
    """The checker's report on ``bad_rules/name``, made once for the tests that read it
    (reports are deterministic: test_reports_are_deterministic)."""
    return check_rules([str(BAD / name)])


@pytest.mark.parametrize("name", sorted(BAD_CASES))
def test_wrong_rules_are_caught_at_their_line(name: str) -> None:
    report = report_of(name)
    assert report.rows and all(r.where.startswith(str(BAD / name)) for r in report.rows)
    failed = {(r.where, r.check) for r in report.failures}
    assert failed == {(where(name, needle), check) for needle, check in BAD_CASES[name]}
    assert all(r.result == PASS for r in report.rows if r.result != FAIL)


def rows_of(name: str) -> dict[tuple[str, str], str]:
    return {(r.where, r.check): r.detail for r in report_of(name).rows}


def test_failure_details_say_what_is_wrong() -> None:
    jvp = rows_of("wrong_jvp.rules")
    assert "sympy real: no (jvp - derivative = -2*dx*cos(x)" in jvp[where("wrong_jvp.rules", "-cos(x)"), "derivative"]
    assert "finite difference" in jvp[where("wrong_jvp.rules", "-cos(x)"), "derivative"]
    tr = rows_of("wrong_transpose.rules")
    assert tr[where("wrong_transpose.rules", "ct * y"), "adjoint"].startswith("real ok; complex: Re<ct, J t> = ")
    assert tr[where("wrong_transpose.rules", "conj(x) * ct"), "adjoint"] == "real ok; complex ok"
    rw = rows_of("unsound_rewrite.rules")
    assert rw[where("unsound_rewrite.rules", "x * 0 -> 0"), "sound"] == "float64: at x=inf: lhs nan, rhs 0"
    assert rw[where("unsound_rewrite.rules", "sqrt(x * x)"), "sound"] == "float64: at x=-1: lhs 1, rhs -1"
    assert rw[where("unsound_rewrite.rules", "log(exp(x))"), "sound"].startswith("complex128: ")


def test_reverse_mode_is_checked_against_forward_mode_where_a_rule_branches() -> None:
    row = rows_of("select_of_tangents.rules")[where("select_of_tangents.rules", "jvp:       select("), "derivative"]
    assert "reverse mode at x=0: Re<J^H ct, t> nan, forward Re<ct, J t> " in row


def test_a_primitive_without_semantics_or_meaning_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "opaque.rules"
    path.write_text("primitive opaque(x)\n    type elementwise\n    dtypes inexact\n    jvp: opaque(dx)\n")
    (row_d, row_l, row_b) = check_rules([str(path)]).rows
    assert (row_d.result, row_l.result, row_b.result) == (SKIP, SKIP, SKIP)
    assert row_b.check == "batched"
    assert "opaque has no NumPy semantics and no meaning" in row_d.detail
    assert "opaque has no NumPy semantics and no meaning" in row_b.detail


def test_a_rule_that_makes_the_engine_fail_is_a_failed_check(tmp_path: Path) -> None:
    path = tmp_path / "shape.rules"  # the tangent has the wrong shape: instantiate rejects it
    path.write_text("primitive total(x)[axes]\n    type reduce\n    dtypes number\n    meaning x\n"
                    "    jvp: dx\n")
    rows = check_rules([str(path)]).rows
    assert {r.result for r in rows} == {FAIL}  # the batching row too: the meaning does not reduce
    assert [r.where for r in rows] == [f"{path}:5", f"{path}:5", f"{path}:1"]
    assert "template gives" in rows[0].detail


def test_a_literal_under_a_broadcast_matches_any_splat(tmp_path: Path) -> None:
    path = tmp_path / "splat.rules"
    path.write_text("rewrite    x + broadcast_in_dim(1) -> x\n")
    (row,) = check_rules([str(path)]).rows
    assert (row.where, row.result) == (f"{path}:1", FAIL)
    assert row.detail.startswith("float64: at x=0: lhs 1, rhs 0")


def test_malformed_file_raises_with_its_location() -> None:
    with pytest.raises(RuleSyntaxError) as err:
        check_rules([str(BAD / "malformed.rules")])
    assert str(err.value).startswith(f"{BAD / 'malformed.rules'}:4:5: expected ',' or ')'")


@pytest.mark.slow  # the whole catalog, twice
def test_reports_are_deterministic() -> None:
    a = check_rules(only=["mul", "div", "log"])
    b = check_rules(only=["mul", "div", "log"])
    assert [vars(r) for r in a.rows] == [vars(r) for r in b.rows]
    assert {r.primitive for r in a.rows} == {"mul", "div", "log"}


# --- the command line -------------------------------------------------------------------------


def test_cli_names_each_failure_and_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-rules", str(BAD / "wrong_transpose.rules")]) == 1
    out = capsys.readouterr().out
    head = out.splitlines()[0].split()
    assert head == ["primitive", "rule", "file:line", "check", "result", "detail"]
    for needle in ("ct * y", "2 * ct"):
        assert f"{where('wrong_transpose.rules', needle)}: " in out
    assert "11 checks: 9 pass, 0 exempt, 0 warn, 0 skip, 2 FAIL" in out


def test_cli_failures_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-rules", "--failures", str(BAD / "unsound_rewrite.rules")]) == 1
    table = capsys.readouterr().out.split("\n\n")[0].splitlines()
    assert len(table) == 2 + 4 and all(" FAIL " in line for line in table[2:])


@pytest.mark.parametrize("args,message", [
    ([str(BAD / "malformed.rules")], "malformed.rules:4:5: expected ',' or ')', found 'type'"),
    ([str(BAD / "missing.rules")], "cannot read rule file"),
    (["--only", "mul,nope"], "unknown primitive(s) nope; known: abs, acos, acosh, add,"),
])
def test_cli_bad_input_exits_2_with_one_line(capsys, args: list[str], message: str) -> None:
    assert main(["check-rules", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("tidu: error: ") and message in line


def test_sympy_comparisons_are_bounded_in_time(tmp_path: Path) -> None:
    """A SymPy comparison past --sympy-timeout is stopped (its worker process killed): the
    verdict is "?" with a note, and the numeric checks decide; a wrong rule still fails."""
    path = tmp_path / "user.rules"
    path.write_text("primitive wave(x)\n    type elementwise\n    dtypes inexact\n"
                    "    meaning sin(x) * exp(x) / (1 + x * x)\n"
                    "    jvp: dx * (cos(x) * exp(x) / (1 + x * x) + wave(x) - 2 * x * wave(x) / (1 + x * x))\n")
    report = check_rules([str(path)], sympy_timeout=1e-6)
    derivative = next(r for r in report.rows if r.check == "derivative")
    assert derivative.result == PASS
    assert "sympy real: ? (SymPy stopped after 1e-06 s)" in derivative.detail
    assert "fd real: max err" in derivative.detail
    unbounded = next(r for r in check_rules([str(path)], sympy_timeout=None).rows if r.check == "derivative")
    assert unbounded.result == PASS and "sympy real: yes" in unbounded.detail
    wrong = check_rules([str(BAD / "wrong_jvp.rules")], sympy_timeout=1e-6)
    assert {(r.where, r.check) for r in wrong.failures} == {
        (where("wrong_jvp.rules", needle), check) for needle, check in BAD_CASES["wrong_jvp.rules"]}


def test_cli_sympy_timeout_must_be_seconds(capsys) -> None:
    assert main(["check-rules", "--sympy-timeout", "-1", "--only", "mul"]) == 2
    assert "--sympy-timeout must be 0 (no bound) or positive seconds, got -1" in capsys.readouterr().err


def test_cli_subprocess_on_builtin_primitives() -> None:
    exe = Path(sys.executable).with_name("tidu")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "tidu.cli"]
    proc = subprocess.run([*cmd, "check-rules", "--only", "exp,reshape"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = proc.stdout.split("\n\n")[0].splitlines()[2:]
    assert {line.split()[0] for line in rows} == {"exp", "reshape"}
    assert all(" pass " in line for line in rows)


def test_taylor_check_catches_a_wrong_recurrence(monkeypatch):
    """The jet (Taylor mode) check: every rule of tidu.transforms.jet passes against SymPy's
    series or repeated linearization, and a wrong one fails: exp's series given by sin's
    rule, and the complex sign treated as piecewise constant (tidu's rule until the check
    found it: z / |z| is smooth)."""
    cat = catalog()
    impls = implementations(cat)
    assert check_taylor(cat, cat["exp"], impls).result == "pass"
    assert "SymPy" in check_taylor(cat, cat["tanh"], impls).detail
    assert check_taylor(cat, cat["sign"], impls).result == "pass"
    monkeypatch.setitem(jet.RULES, "exp", jet.RULES["sin"])
    row = check_taylor(cat, cat["exp"], impls)
    assert row.result == "FAIL" and "SymPy's series" in row.detail
    monkeypatch.setitem(jet.RULES, "sign", lambda xs, attrs, K: [tnp.sign(xs[0][0])] + [None] * K)
    row = check_taylor(cat, cat["sign"], impls)
    assert row.result == "FAIL" and "repeated linearization" in row.detail
