"""Coverage of jax.numpy: which share of its differentiable functions tidu.numpy has.

"Differentiable functions" are jax.numpy's public callables whose result has a
floating-point or complex part that depends on a floating-point or complex argument, so
that a derivative is asked for. Left out, each category with its reason:

- types: dtypes, scalar types and classes (``float32``, ``ndarray``, ``ufunc``) are not
  functions;
- integer and bit operations: defined on integers only (``bitwise_and``, ``gcd``, ...);
- introspection, printing, I/O and dtype logic: no array result (``can_cast``, ``finfo``,
  ``load``, ``printoptions``, ...);
- constructors from shapes or integers: no differentiable input (``zeros``, ``eye``,
  ``arange``, window functions but ``kaiser`` (its ``beta``), ``indices``, ``tril_indices``, ...);
- integer or boolean results: comparisons, predicates, index searches (``isnan``,
  ``argsort``, ``searchsorted``, ``digitize``, ...); no derivative exists (``bincount``
  and ``histogram`` count: their weights, and the bin edges, have one; so does ``frexp``'s
  mantissa);
- value-dependent shapes: the result's shape depends on the values (``nonzero``,
  ``unique``, ...), which a trace cannot represent (JAX needs ``size=``; ``extract``
  counts: with ``size=`` its picks have derivatives).

The table also says how many of each excluded category tidu.numpy has.

Everything else counts, including rounding (derivative 0 almost everywhere, as JAX
defines it) and functions that take callables (``vectorize``, ``piecewise``). A function
counts as covered when ``tidu.numpy`` has it AND tests/test_numpy_coverage.py compares it
with jax.numpy (values, first and second derivatives). Target: >= 90 %.

Every covered function of jax.numpy, jax.nn and jax.numpy.linalg, and of
jax.scipy.special and jax.numpy.fft those jax.vmap can map (all but bernoulli, whose
argument is the length of its result, and fftfreq/rfftfreq, which take a length and a
spacing: the tests' NOT_BATCHED), is also compared batched: ``tidu.vmap`` of it and of its
gradient (for complex inputs in tests/test_numpy_coverage.py, its JVP) against
``jax.vmap`` of JAX's (each test file's vmap test; the default run a subset that applies
every batching rule, the slow step all).

    python bench/coverage.py [--quick]     (--quick is the same: the count takes a second)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from common import judge, table

os.environ.setdefault("JAX_PLATFORMS", "cpu")

TARGET = 0.90

EXCLUDED: dict[str, tuple[str, ...]] = {
    "integer and bit operations": (
        "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert", "bitwise_count",
        "bitwise_left_shift", "bitwise_right_shift", "invert", "left_shift", "right_shift", "gcd", "lcm",
        "packbits", "unpackbits"),
    "introspection, printing, I/O, dtype logic": (
        "can_cast", "promote_types", "result_type", "issubdtype", "isdtype", "iinfo", "finfo", "isscalar",
        "iscomplexobj", "isrealobj", "iterable", "ndim", "shape", "size", "get_printoptions", "printoptions",
        "set_printoptions", "load", "save", "savez", "array_repr", "array_str", "einsum_path", "from_dlpack",
        "frombuffer", "fromfile", "fromiter", "fromstring", "frompyfunc", "fromfunction", "broadcast_shapes"),
    "constructors from shapes or integers": (
        "zeros", "ones", "empty", "eye", "identity", "tri", "arange", "bartlett", "blackman", "hamming",
        "hanning", "indices", "ix_", "diag_indices", "diag_indices_from", "tril_indices",
        "tril_indices_from", "triu_indices", "triu_indices_from", "mask_indices", "ravel_multi_index",
        "unravel_index"),
    "integer or boolean results": (
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "isnan", "isinf",
        "isfinite", "isposinf", "isneginf", "isclose", "allclose", "array_equal", "array_equiv", "isin",
        "iscomplex", "isreal", "signbit", "logical_and", "logical_or", "logical_not", "logical_xor",
        "all", "any", "argmax", "argmin", "nanargmax", "nanargmin", "argsort", "argpartition", "lexsort",
        "argwhere", "count_nonzero", "searchsorted", "digitize", "histogram2d", "histogramdd", "nextafter",
        "spacing"),
    "value-dependent shapes": (
        "nonzero", "flatnonzero", "unique", "unique_all", "unique_counts", "unique_inverse", "unique_values",
        "setdiff1d", "setxor1d", "union1d", "intersect1d", "trim_zeros"),
}


TESTS = Path(__file__).resolve().parent.parent / "tests"


def _test_module(name: str) -> Any:
    """tests/<name>.py, loaded (it imports its helpers from tests/)."""
    if str(TESTS) not in sys.path:
        sys.path.append(str(TESTS))
    spec = importlib.util.spec_from_file_location(f"_coverage_{name}", TESTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _tested() -> set[str]:
    """The names tests/test_numpy_coverage.py compares with jax.numpy (each batched too:
    its test_vmap_against_jax has every name of CASES)."""
    module = _test_module("test_numpy_coverage")
    return set(module.CASES) | set(getattr(module, "ALSO_TESTED", ()))


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).add_argument("--quick", action="store_true")
    import jax.numpy as jnp

    import tidu.numpy as tnp

    public = sorted(n for n in dir(jnp) if not n.startswith("_") and callable(getattr(jnp, n)))
    types = [n for n in public if isinstance(getattr(jnp, n), type)]
    excluded = {n: cat for cat, names in EXCLUDED.items() for n in names if n in public}
    counted = [n for n in public if n not in types and n not in excluded]
    tested = _tested()
    has = [n for n in counted if hasattr(tnp, n)]
    covered = [n for n in has if n in tested]
    missing = [n for n in counted if n not in covered]
    share = len(covered) / len(counted)
    print("## tidu.numpy coverage of jax.numpy\n")
    print(f"jax.numpy has {len(public)} public callables; {len(counted)} are differentiable functions "
          f"(the others are types or excluded below, see bench/coverage.py). tidu.numpy has "
          f"{len(has)} of them, {len(covered)} compared with jax.numpy in tests/test_numpy_coverage.py (values, "
          f"first and second derivatives; values and first derivatives batched too, tidu.vmap against "
          f"jax.vmap): "
          f"{100 * share:.1f} %. Target ≥ 90 %: {judge(100 * share, 100 * TARGET, '{:.1f} %', True)}.\n")
    rows = [["types (not functions)", len(types), "-"]]
    rows += [[cat, sum(1 for c in excluded.values() if c == cat),
              f"{sum(1 for n, c in excluded.items() if c == cat and hasattr(tnp, n))} in tidu.numpy"]
             for cat in EXCLUDED]
    rows.append(["**differentiable functions**", len(counted), f"{len(covered)} ({100 * share:.1f} %)"])
    print(table(["jax.numpy callables", "count", "in tidu.numpy, tested"], rows))
    print(f"\nMissing ({len(missing)}): {' '.join(f'`{n}`' for n in missing) or 'none'}.")
    print()
    print(nn_section())
    print()
    print(special_section())
    print()
    print(fft_section())
    print()
    print(linalg_section())
    sys.stdout.flush()


def _share_section(title: str, reference: str, mine: str, tested_by: str, public: list[str],
                   covered: list[str], batched: str = "") -> str:
    """A coverage subsection: how many of ``reference``'s functions ``mine`` has and tests
    (``batched``: which of them are also compared batched, in words)."""
    missing = [n for n in public if n not in covered]
    share = 100 * len(covered) / len(public)
    return (f"### {title}\n\n"
            f"{reference} has {len(public)} functions; {mine} has and {tested_by} compares with {reference} "
            f"{len(covered)} of them{batched}: {share:.1f} %. Target ≥ 90 %: "
            f"{judge(share, 100 * NN_TARGET, '{:.1f} %', True)}.\n\n"
            + table([f"{reference} functions", "count"],
                    [[f"in {mine}, tested", len(covered)], ["missing", len(missing)]])
            + f"\n\nMissing: {' '.join(f'`{n}`' for n in missing) or 'none'}.")


def special_section() -> str:
    """jax.scipy.special's functions that tidu.scipy.special has and tests/test_special.py
    compares with jax.scipy.special."""
    import jax.scipy.special as jss

    import tidu.scipy.special as tss

    text = (Path(__file__).resolve().parent.parent / "tests" / "test_special.py").read_text()
    public = sorted(n for n in dir(jss) if not n.startswith("_") and callable(getattr(jss, n)))
    covered = [n for n in public if hasattr(tss, n) and (f'"{n}"' in text or f"tss.{n}(" in text
                                                         or f"special.{n}(" in text)]
    not_batched = [n for n in covered if n in _test_module("test_special").NOT_BATCHED]
    return _share_section("tidu.scipy.special coverage of jax.scipy.special", "jax.scipy.special", "tidu.scipy.special",
                          "tests/test_special.py", public, covered,
                          f" (values and gradients batched too, tidu.vmap against jax.vmap, all but "
                          f"{', '.join(not_batched)}, which jax.vmap cannot map)" if not_batched
                          else " (values and gradients batched too, tidu.vmap against jax.vmap)")


NN_TARGET = 0.90
NN_NOT_COUNTED = ("get_scaled_dot_general_config",)  # a configuration object, not a function


def nn_section() -> str:
    """jax.nn's functions that tidu.nn has and tests/test_nn.py compares with jax.nn."""
    import jax.nn

    import tidu.nn as tnn

    text = (Path(__file__).resolve().parent.parent / "tests" / "test_nn.py").read_text()
    public = sorted(n for n in dir(jax.nn) if not n.startswith("_") and callable(getattr(jax.nn, n))
                    and not isinstance(getattr(jax.nn, n), type) and n not in NN_NOT_COUNTED)
    covered = [n for n in public if hasattr(tnn, n) and (f'"{n}"' in text or f"tnn.{n}(" in text)]
    return _share_section("tidu.nn coverage of jax.nn", "jax.nn", "tidu.nn",
                          "tests/test_nn.py", public, covered,
                          " (values and gradients batched too, tidu.vmap against jax.vmap)")


FFT_TARGET = 0.90


def fft_section() -> str:
    """jax.numpy.fft's functions that tidu.numpy.fft has and tests/test_fft.py compares with
    jax.numpy.fft."""
    import jax.numpy as jnp

    import tidu.numpy as tnp

    text = (Path(__file__).resolve().parent.parent / "tests" / "test_fft.py").read_text()
    public = sorted(n for n in dir(jnp.fft) if not n.startswith("_") and callable(getattr(jnp.fft, n))
                    and not isinstance(getattr(jnp.fft, n), type))
    covered = [n for n in public if hasattr(tnp.fft, n) and f'"{n}"' in text]
    not_batched = sorted(_test_module("test_fft").NOT_BATCHED)
    return _share_section("tidu.numpy.fft coverage of jax.numpy.fft", "jax.numpy.fft", "tidu.numpy.fft",
                          "tests/test_fft.py", public, covered,
                          f" (values and gradients batched too, tidu.vmap against jax.vmap, all but "
                          f"{', '.join(not_batched)}, which take a length and a spacing)")



def linalg_section() -> str:
    """jax.numpy.linalg's functions that tidu.numpy.linalg has and a test compares with
    jax.numpy.linalg (or NumPy's function of the same name, where JAX's agrees with it)."""
    import jax.numpy as jnp

    import tidu.numpy as tnp

    tests = Path(__file__).resolve().parent.parent / "tests"
    text = "".join(p.read_text() for p in sorted(tests.glob("test_*.py")))
    public = sorted(n for n in dir(jnp.linalg) if not n.startswith("_") and callable(getattr(jnp.linalg, n))
                    and not isinstance(getattr(jnp.linalg, n), type))
    covered = [n for n in public if hasattr(tnp.linalg, n)
               and (f"linalg.{n}(" in text or f'"linalg.{n}"' in text or f'"{n}"' in text)]
    return _share_section("tidu.numpy.linalg coverage of jax.numpy.linalg", "jax.numpy.linalg", "tidu.numpy.linalg",
                          "tests/test_*.py", public, covered, " (values and gradients batched too, tidu.vmap against "
                          "jax.vmap: tests/test_linalg.py, test_linalg_extras.py, test_linalg_more.py)")



if __name__ == "__main__":
    main()
