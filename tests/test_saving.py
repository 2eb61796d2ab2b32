"""Programs that can be kept (issue 29, part 5): ``pickle``, ``Program.save`` /
``tidu.load_program`` and ``to_numpy_source(..., standalone=True)``. Every round trip
gives the same bits as the program it came from (NumPy back end); standalone source runs
in a fresh interpreter. The broad matrix (every primitive of tests/primspecs.py and
more transforms) is in the slow step."""

from __future__ import annotations

import io
import json
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from primspecs import SPECS, sample
from test_numpy_lowering import program_of
from tidu.lowering.numpy import StandaloneError
from tidu.lowering.saving import FORMAT_VERSION

import tidu
import tidu.numpy as tnp
from tidu import lax
from tidu.core.keys import Aval

RNG = np.random.default_rng(29)


# --- the catalogue of examples --------------------------------------------------------------


def _f(x, a):
    return tnp.sum(tnp.exp(a * x) * tnp.sin(x) + tnp.tanh(x * x))  # tests/test_determinism.py's


def _scan_cond(x):  # tests/test_determinism.py's control flow: a scan whose body has a cond
    c, ys = lax.scan(lambda c, xi: (c * tnp.sin(xi) + lax.cond(xi > 0.5, tnp.cos, tnp.exp, c), c), x[0], x)
    return c + tnp.sum(ys)


def _while(x):
    return tnp.sum(lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, tnp.sin(c[1]) + x), (0, x))[1])


def _linalg(a):
    s = a @ a.T + 4.0 * tnp.eye(3)
    return tnp.sum(tnp.log(tnp.diagonal(tnp.linalg.cholesky(s)))) + tnp.sum(tnp.linalg.solve(s, a))


def _complex(z, k):
    return tnp.sum(tnp.abs(z) ** 2) * tnp.pi + k[0]


def _ints(n, m):
    return tnp.where(m, n * 3 - 1, n // 2), tnp.sum(n) > 2


X = np.linspace(0.1, 1.0, 4)
A = np.arange(4.0)
M = RNG.normal(size=(3, 3))
Z = np.array([1 + 1j, 2j, -0.5 + 0.25j], np.complex64)
K = np.array([1, 2], np.int32)
N = np.array([3, -4, 7], np.int64)
B = np.array([True, False, True])

FAST = {  # name -> (function, example arguments)
    "value_and_grad": (tidu.value_and_grad(_f), (X, A)),
    "hessian_RoR": (tidu.hessian(_f, mode="RoR"), (X, A)),
    "grad_scan_cond": (tidu.grad(_scan_cond), (X,)),
    "hessian_scan_cond": (tidu.hessian(_scan_cond, mode="RoR"), (X,)),
    "jacfwd_while": (tidu.jacfwd(_while), (X,)),
    "vmap_grad": (tidu.vmap(tidu.grad(lambda x: tnp.sin(x) * tnp.exp(x))), (X,)),
    "grad_linalg": (tidu.grad(_linalg), (M,)),
    "grad_complex": (tidu.grad(_complex), (Z, K)),
    "ints_bools": (_ints, (N, B)),
}
SLOW = {
    "jacfwd": (tidu.jacfwd(lambda x: tnp.cumsum(tnp.sin(x)) * x), (X,)),
    "hessian_fwd": (tidu.hessian(_f, mode="FoR"), (X, A)),
    "vmap_hessian": (tidu.vmap(tidu.hessian(lambda x: tnp.sum(tnp.tanh(x) ** 3))), (np.ones((3, 2)),)),
    "hessian_while": (tidu.hessian(_while, mode="FoF"), (X,)),
    "float32": (tidu.grad(lambda x: tnp.sum(tnp.exp(x * np.float32(0.1)) / 3)), (X.astype(np.float32),)),
    "eigh_svd": (tidu.grad(lambda a: tnp.sum(tnp.linalg.eigvalsh(a + a.T)) + tnp.sum(tnp.linalg.svd(a)[1])), (M,)),
    "nonfinite_consts": (lambda x: (x * np.inf, x + np.array([np.nan, -0.0, 1e-300, 5e-324])), (A,)),
    "big_constant": (lambda x: x @ np.arange(100.0).reshape(10, 10) + 0.1, (np.ones(10),)),
}


def _programs(table: dict) -> list[tuple[str, tidu.Program, list]]:
    return [(name, tidu.make_graph(fn)(*args).program, list(args)) for name, (fn, args) in table.items()]


def _primitive_programs() -> list[tuple[str, tidu.Program, list]]:
    out = []
    for spec in SPECS:
        for dtype in spec.dtypes:
            args = sample(spec, dtype, RNG)
            avals = [Aval(a.shape, a.dtype.name) for a in args]
            out.append((f"{spec.op}-{dtype}", program_of(spec.op, avals, spec.attrs), args))
    return out


def _same(got: list, want: list) -> bool:
    return len(got) == len(want) and all(g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()
                                         for g, w in zip(got, want, strict=True))


def _roundtrips(cases: list[tuple[str, tidu.Program, list]], tmp_path: Path) -> None:
    for name, prog, args in cases:
        want = prog.eval(args)
        again = pickle.loads(pickle.dumps(prog))
        assert str(again) == str(prog), name
        assert _same(again.eval(args), want), f"{name}: pickle"
        path = tmp_path / f"{name}.tidu"
        prog.save(path)
        loaded = tidu.load_program(path)
        assert isinstance(loaded, tidu.Program) and str(loaded) == str(prog), name
        assert _same(loaded.eval(args), want), f"{name}: save/load"


RUNNER = """
import importlib, sys, numpy as np
sys.path.insert(0, sys.argv[1])
data = np.load(sys.argv[2])
out = {}
for name in sys.argv[3:]:
    module = importlib.import_module(name)
    args = [data[f"{name}/in{i}"] for i in range(len(module.INPUTS))]
    for i, v in enumerate(module.run(*args)):
        out[f"{name}/out{i}"] = v
np.savez(sys.argv[2] + ".out.npz", **out)
"""


def _standalone(cases: list[tuple[str, tidu.Program, list]], tmp_path: Path) -> None:
    """Every case's standalone module run in one fresh interpreter (no tidu imported)."""
    inputs, names = {}, []
    for i, (_, prog, args) in enumerate(cases):
        module = f"m{i}"
        (tmp_path / f"{module}.py").write_text(prog.to_numpy_source(standalone=True))
        names.append(module)
        inputs.update({f"{module}/in{j}": np.asarray(a) for j, a in enumerate(args)})
    data = tmp_path / "inputs.npz"
    np.savez(data, **inputs)
    code = RUNNER + "\nassert 'tidu' not in sys.modules\n"
    subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path), str(data), *names],
                   check=True, timeout=300, cwd=tmp_path)
    got = np.load(str(data) + ".out.npz")
    for module, (name, prog, args) in zip(names, cases, strict=True):
        want = prog.eval(args)
        assert _same([got[f"{module}/out{i}"] for i in range(len(want))], want), f"{name}: standalone"


# --- fast ---------------------------------------------------------------------------------


def test_pickle_and_save_round_trips_give_the_same_bits(tmp_path: Path) -> None:
    _roundtrips(_programs(FAST), tmp_path)


def test_standalone_source_runs_in_a_fresh_interpreter(tmp_path: Path) -> None:
    _standalone(_programs(FAST), tmp_path)


def test_default_source_is_unchanged_and_standalone_defines_its_constants() -> None:
    prog = tidu.make_graph(tidu.value_and_grad(lambda x: tnp.sum(tnp.exp(3.0 * x))))(X).program
    assert prog.to_numpy_source().startswith("def program(s0):") and "s1 = c1" in prog.to_numpy_source()
    text = tidu.to_numpy_source(tidu.value_and_grad(lambda x: tnp.sum(tnp.exp(3.0 * x))), X, standalone=True)
    assert "c1 = _fixed(np.full((4,), 3.0, dtype=np.float64))" in text
    assert "import tidu" not in text and "def run(*inputs):" in text


def test_saving_is_deterministic_and_caches_are_not_saved(tmp_path: Path) -> None:
    prog = tidu.make_graph(tidu.grad(_scan_cond))(X).program
    prog.eval([X])  # fills the caches
    first, second = io.BytesIO(), io.BytesIO()
    prog.save(first)
    prog.save(second)
    assert first.getvalue() == second.getvalue()
    assert pickle.loads(pickle.dumps(prog))._cache == {}
    doc = json.loads(zipfile.ZipFile(first).read("program.json"))
    assert doc["format"] == "tidu-program" and doc["version"] == FORMAT_VERSION and doc["needs"] == []
    assert doc["inputs"] == [{"slot": 0, "name": "x", "key": {"named": "x"}}]
    assert {b["label"] for b in doc["bodies"]} == {"scan", "cond"}


def _saved(tmp_path: Path, edit=None, name: str = "p.tidu") -> Path:
    """The program of value_and_grad(_f) saved, its JSON passed through ``edit``."""
    prog = tidu.make_graph(tidu.value_and_grad(_f))(X, A).program
    path = tmp_path / name
    prog.save(path)
    if edit is not None:
        with zipfile.ZipFile(path) as zf:
            doc = json.loads(zf.read("program.json"))
        edit(doc)
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("program.json", json.dumps(doc))
    return path


def _set(**fields):
    return lambda doc: doc.update(fields)


def test_unreadable_files_say_what_where_and_how_to_fix(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(tidu.ProgramFileError, match=r"notes.txt: not a tidu program file .*Program.save"):
        tidu.load_program(text)
    newer = _saved(tmp_path, _set(version=FORMAT_VERSION + 1))
    with pytest.raises(tidu.ProgramFileError, match=rf"format version {FORMAT_VERSION + 1} .*upgrade tidu"):
        tidu.load_program(newer)
    damaged = _saved(tmp_path, name="damaged.tidu").read_bytes()
    cut = tmp_path / "cut.tidu"
    cut.write_bytes(damaged[: len(damaged) // 2])
    with pytest.raises(tidu.ProgramFileError, match="cut.tidu"):
        tidu.load_program(cut)

    def bad_slot(doc):
        doc["instructions"][3][2] = [999]

    with pytest.raises(tidu.ProgramFileError, match=r"corrupt program file: at instructions\[3\] .*reads a slot"):
        tidu.load_program(_saved(tmp_path, bad_slot))

    def bad_aval(doc):
        doc["avals"][doc["outputs"][0]] = "f32[]"

    with pytest.raises(tidu.ProgramFileError, match=r"the type rule gives f64\[\], the file says f32\[\]"):
        tidu.load_program(_saved(tmp_path, bad_aval))

    def unknown_op(doc):
        doc["instructions"][-1][0] = "frobnicate"

    with pytest.raises(tidu.CatalogMismatchError, match="unknown primitive.*frobnicate"):
        tidu.load_program(_saved(tmp_path, unknown_op))


RULES = """\
primitive my_erf(x)
    type       elementwise
    dtypes     float
    meaning    erf(x)
    numpy      scipy.special.erf
    jvp:       2 / sqrt(pi) * exp(-x * x) * dx

primitive squash(x)
    type       elementwise
    dtypes     float
    meaning    1 / (1 + exp(-x))
    jvp:       out * (1 - out) * dx
"""


def test_user_rules_are_named_when_missing(tmp_path: Path) -> None:
    rules = tmp_path / "mine.rules"
    rules.write_text(RULES)
    my_erf, squash = tidu.op("my_erf"), tidu.op("squash")
    with tidu.use_rules(rules, trusted=True):
        prog = tidu.make_graph(tidu.grad(lambda x: tnp.sum(my_erf(x) * x)))(X).program
        want = prog.eval([X])
        blob = pickle.dumps(prog)
        prog.save(tmp_path / "erf.tidu")
        source = prog.to_numpy_source(standalone=True)
        assert "import scipy.special" in source and "user_op(my_erf, np.float64, (4,)" in source
        with pytest.raises(StandaloneError, match="squash .*numpy"):
            tidu.to_numpy_source(lambda x: squash(x), X, standalone=True)
        assert _same(pickle.loads(blob).eval([X]), want)
        assert _same(tidu.load_program(tmp_path / "erf.tidu").eval([X]), want)
    for load in (lambda: pickle.loads(blob), lambda: tidu.load_program(tmp_path / "erf.tidu")):
        with pytest.raises(tidu.CatalogMismatchError, match=r"primitive\(s\) my_erf of the rules file .*mine.rules.*"
                                                            r"tidu.load_rules"):
            load()
    rules.write_text(RULES.replace("jvp:       out", "jvp:        out"))  # another text
    with tidu.use_rules(rules, trusted=True), pytest.raises(tidu.CatalogMismatchError, match="not the text"):
        tidu.load_program(tmp_path / "erf.tidu")


# --- slow: the broad matrix -----------------------------------------------------------------


@pytest.mark.slow
def test_every_primitive_and_more_transforms_round_trip(tmp_path: Path) -> None:
    cases = _primitive_programs() + _programs(SLOW)
    _roundtrips(cases, tmp_path)
    _standalone(cases, tmp_path)
