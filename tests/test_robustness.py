"""Hostile and careless input: every case answers or fails with a one-line error (exit 2
from the CLI), within a time and memory bound, never an internal error (exit 3), a
traceback or a hang.

The bounds of the subprocess cases are configurable: TIDU_ROBUST_SECONDS (default 60: a
hang guard, at least ten times what the slowest case needs on a quiet machine, so that a
loaded machine cannot fail it; a blow-up would take far longer) and TIDU_ROBUST_MB
(default 2048, peak RSS of the process: the bound that does not depend on speed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidu
import tidu.numpy as tnp
from tidu.cli import main
from tidu.ops.dsl.parse import parse_rules
from tidu.sympy.expr import ExprError, parse

SECONDS = float(os.environ.get("TIDU_ROBUST_SECONDS", "60"))
MEGABYTES = float(os.environ.get("TIDU_ROBUST_MB", "2048"))

# A subprocess's peak memory, its own (Linux: VmHWM, whose high-water mark starts again
# at exec). ru_maxrss is not: Linux carries the spawning process's peak over exec, so
# under a test worker that had grown past the bound it gave the worker's size every time.
_PEAK_MB = textwrap.dedent("""
    def peak_mb():
        import resource
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
""")

_RUNNER = _PEAK_MB + textwrap.dedent("""
    import contextlib, io, json, sys
    from tidu.cli import main

    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
        results.append({"rc": rc, "out": out.getvalue(), "err": err.getvalue()})
    print(json.dumps({"results": results, "mb": peak_mb()}))
""")


def run_cli_bounded_all(argvs: list[list[str]]) -> list[dict]:
    """``tidu argv`` for each of ``argvs``, one after the other in one fresh process, within
    SECONDS each (start-up included) and MEGABYTES: the process's peak RSS bounds every case's."""
    try:
        done = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(argvs)], capture_output=True,
                              text=True, timeout=SECONDS * len(argvs) + 5)  # + Python, NumPy, SymPy start-up
    except subprocess.TimeoutExpired:
        shown = "; ".join(" ".join(a[:40] for a in argv) for argv in argvs)
        pytest.fail(f"tidu {shown[:400]} did not finish within {SECONDS} s a case")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mb"] < MEGABYTES, f"peak {report['mb']:.0f} MB"
    return report["results"]


def run_cli_bounded(argv: list[str]) -> dict:
    """``tidu argv`` in a fresh process of its own, within SECONDS and MEGABYTES."""
    return run_cli_bounded_all([argv])[0]


TOWER = "^".join(["x"] * 100)
SINES = "+".join(f"sin({i}*x)" for i in range(1, 201))


@pytest.mark.parametrize("argv, value", [
    (["diff", "exp(x)*sin(x)", "--wrt", "x", "--order", "20", "--at", "x=1"], -1024 * np.e * np.sin(1.0)),
    # the larger blow-ups are stress runs: CI's slow step
    pytest.param(["diff", TOWER, "--wrt", "x", "--at", "x=1.1"], None, marks=pytest.mark.slow),
    pytest.param(["diff", SINES, "--wrt", "x", "--at", "x=1"], sum(i * np.cos(i) for i in range(1, 201)),
                 marks=pytest.mark.slow),
    pytest.param(["hessian", SINES, "--at", "x=1"], -sum(i * i * np.sin(i) for i in range(1, 201)),
                 marks=pytest.mark.slow),
], ids=["order-20", "power-tower-100", "sum-of-200-sines", "hessian-of-200-sines"])
def test_blow_up_cases_answer_in_bounded_time_and_memory(argv, value):
    r = run_cli_bounded(argv)
    assert r["rc"] == 0, r["err"]
    shown = float(r["out"].rstrip().splitlines()[-1].split("=")[-1].strip(" []"))
    if value is None:  # the tower: d/dx of x^x^...^x at 1.1, by finite differences
        def tower(x: float) -> float:
            v = x
            for _ in range(99):
                v = x ** v
            return v
        value = (tower(1.1 + 1e-6) - tower(1.1 - 1e-6)) / 2e-6
    assert shown == pytest.approx(value, rel=1e-6)


BAD_INPUT = [
    (["diff", "x*1e99999999999", "--wrt", "x"], "col 3: number 1e99999999999 is too large for float64"),
    (["diff", "x*1e-99999999999", "--wrt", "x"], "col 3: number 1e-99999999999 is too small for float64"),
    (["diff", "x^2", "--wrt", "x", "--at", "x=1e-100000000"], "--at x: col 1: number 1e-100000000 is too small"),
    (["diff", "x*\u00b2", "--wrt", "x"], "col 3: unexpected character '\u00b2'"),
    (["diff", "x*\u2474", "--wrt", "x"], "col 3: unexpected character '\u2474'"),
    (["diff", "x*" + "9" * 2000, "--wrt", "x"], "has more than 1000 digits"),
    (["diff", "x^3", "--wrt", "x", "--order", "101"], "--order 101 is above --max-order 100"),
    (["diff", "x" + "+x" * 10_000, "--wrt", "x"], "more than --max-length 20,000"),
    (["hessian", "x*y", "--max-nodes", "3"], "more than 3 graph values"),
]


@pytest.fixture(scope="module")
def bad_input_results() -> dict[str, dict]:
    """Every bad-input case, each answered at once: run in one fresh process (one start-up,
    not one each), whose peak RSS bounds each case's."""
    argvs = [argv for argv, _ in BAD_INPUT]
    return {json.dumps(argv): r for argv, r in zip(argvs, run_cli_bounded_all(argvs), strict=True)}


@pytest.mark.parametrize("argv, message", BAD_INPUT)
def test_bad_input_is_one_line_exit_2(argv, message, bad_input_results):
    r = bad_input_results[json.dumps(argv)]
    assert r["rc"] == 2
    assert r["err"].count("\n") == 1 and message in r["err"], r["err"]


def test_an_expression_may_start_with_a_minus(capsys):
    assert main(["diff", "-x^2", "--wrt", "x", "--at", "x=-3"]) == 0
    out = capsys.readouterr().out
    assert "d/dx (-x^2)" in out and out.rstrip().endswith("= 6")


def test_rule_files_nested_deep_or_not_utf8(tmp_path, capsys):
    deep = tmp_path / "deep.rules"
    deep.write_text("rewrite " + "(" * 500 + "x" + ")" * 500 + " -> x\n")
    signs = tmp_path / "signs.rules"
    signs.write_text("rewrite " + "-" * 5000 + "x -> x\n")
    chain = tmp_path / "chain.rules"  # no parentheses, but a tree 500 deep (the printer recursed)
    chain.write_text("primitive deepfn(x)\n    type elementwise\n    dtypes float\n    meaning x\n"
                     "    jvp: dx\n    rewrite deepfn(x" + " + 1" * 500 + ") -> deepfn(x)\n")
    latin = tmp_path / "latin1.rules"
    latin.write_bytes(b"# caf\xe9\nrewrite x -> x\n")
    for path, message in [(deep, "deep.rules:1:109: expression nested more than 100 deep"),
                          (signs, "signs.rules:1:109: expression nested more than 100 deep"),
                          (chain, "chain.rules:6:13: expression nested more than 100 deep (each operator"),
                          (latin, "latin1.rules:1:6: not UTF-8 text")]:
        assert main(["check-rules", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_resource_limits_stop_a_geometric_derivative():
    g = lambda x: tnp.sin(x) * tnp.exp(x)  # noqa: E731
    for _ in range(12):
        g = tidu.jacrev(g)  # reverse over reverse: geometric (nested grads share their values)
    with tidu.resource_limits(graph_values=20_000), pytest.raises(tidu.LimitError, match="20,000 graph values"):
        g(0.3)
    with tidu.resource_limits(graph_values=20_000):  # a small call is not affected
        assert tidu.grad(tnp.sin)(0.3) == np.cos(0.3)
    tidu.set_resource_limits(graph_values=20_000)
    try:
        with pytest.raises(tidu.LimitError):
            g(0.25)
        with tidu.resource_limits(graph_values=None):  # lifted inside the block
            pass
    finally:
        tidu.set_resource_limits(graph_values=None)
    with pytest.raises(ValueError, match="positive int"):
        tidu.set_resource_limits(graph_values=0)


def test_ac_rules_with_default_limits_return_under_2_gb():
    code = _PEAK_MB + textwrap.dedent("""
        from tidu import FragmentBuilder, Aval, materialize_merge, resolve
        from tidu.ops.catalog import builtin_rule_files, load_catalog, use_catalog
        AC = "rewrite x + y -> y + x\\nrewrite (x + y) + z -> x + (y + z)\\nrewrite x + (y + z) -> (x + y) + z\\n"
        b = FragmentBuilder("S")
        xs = [b.input(f"x{i}", Aval((), "float64")) for i in range(20)]
        acc = xs[0]
        for x in xs[1:]:
            acc = b.add_op("add", [acc, x])[0]
        key = b.output(acc)
        # trusted: associativity is not a law of floating point, so the soundness check would
        # refuse these rules; they are here to blow the e-graph up
        with use_catalog(load_catalog([*builtin_rule_files(), ("ac.rules", AC)], trusted=True)):
            g = materialize_merge(resolve(b.build()), [key])
        print(g.op_count, g.stats["stop_reason"], int(peak_mb()))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    ops, _reason, mb = done.stdout.split()
    assert int(ops) == 19 and int(mb) < MEGABYTES


# --- fuzzing: any text is a result or a one-line error ------------------------------------

_EXPR_ALPHABET = st.sampled_from(list("xy+-*/^().,e0123456789 ") + ["sin", "exp", "log", "**", "pi",
                                                                   "\u00b2", "1e999", "1e-999", "\u0663"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_EXPR_ALPHABET, max_size=30).map("".join))
def test_expression_parser_fuzz(text):
    try:
        parse(text, ["x", "y"])
    except ExprError as e:
        assert "\n" not in str(e) and str(e).startswith("col ")


@settings(max_examples=40, deadline=None)
@given(st.lists(_EXPR_ALPHABET, min_size=1, max_size=16).map("".join),
       st.sampled_from([[], ["--order", "2"], ["--at", "x=0.5"], ["--mode", "F"]]))
def test_cli_fuzz_never_exits_3(text, extra):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        rc = main(["diff", text, "--wrt", "x", *extra])
    assert rc in (0, 2), err.getvalue()
    assert err.getvalue().count("\n") <= 1


_RULE_ALPHABET = st.sampled_from(list("xyz+-*/(),[]=\n ") + ["rewrite ", " -> ", "when ", "exp", "log",
                                                            "primitive ", "jvp", "1.5", "#", "...", "\u00e9"])


@settings(max_examples=150, deadline=None)
@given(st.lists(_RULE_ALPHABET, max_size=40).map("".join))
def test_rule_parser_fuzz(text):
    try:
        parse_rules(text, "fuzz.rules")
    except ValueError as e:  # RuleSyntaxError
        assert str(e).startswith("fuzz.rules:") and "\n" not in str(e), str(e)


def test_symbolic_terms_of_shared_graphs_are_bounded():
    from tidu.simplify.symbolic import graph_term

    def f(x):
        for _ in range(60):  # 2^60 nodes written as a tree
            x = x * x + x
        return x

    g = tidu.make_graph(f, simplify=False)(np.float64(0.5)).graph
    with pytest.raises(ValueError, match="over 1,000,000 characters"):
        graph_term(g)


def test_traced_positions_of_delete_and_insert_are_a_clear_error():
    # np.delete on a tracer dispatched back to tnp.delete: a RecursionError
    x = np.linspace(0.1, 0.9, 12).reshape(3, 4)
    for fn in (lambda a: tnp.delete(a, a[:2, :3]), lambda a: tnp.insert(a, tnp.argmax(a), 1.0)):
        with pytest.raises(TypeError, match="positions .* must be constants"):
            tidu.jit(fn)(x)


def test_numpy_attribute_errors_become_type_errors_naming_the_function():
    with pytest.raises(TypeError, match=r"tnp.angle: an argument is not an array NumPy can take \(got NoneType\)"):
        tnp.angle(None)
