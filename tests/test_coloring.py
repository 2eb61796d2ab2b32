"""Graph colorings for compressed sparse Jacobians/Hessians (tidu.transforms.coloring), checked by brute force:
coloring properties enumerated pair by pair and path by path, exact recovery of random J and H."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from tidu.transforms.coloring import Recovery, column_coloring, compressed_recovery, seed_matrix, star_coloring

# ---------------------------------------------------------------- pattern generators (dense boolean)


def tridiagonal(n):
    return (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) <= 1)


def banded(rng, m, n, lower, upper, fill=1.0):
    i, j = np.indices((m, n))
    band = (j - i <= upper) & (i - j <= lower)
    return band & (rng.random((m, n)) < fill)


def arrowhead(n, hub):
    d = np.eye(n, dtype=bool)
    d[hub, :] = True
    d[:, hub] = True
    return d


def random_symmetric(rng, n, density, diagonal=True):
    a = rng.random((n, n)) < density
    a = a | a.T
    np.fill_diagonal(a, diagonal)
    return a


def block_diagonal(rng, sizes):
    blocks = [rng.random((s, s)) < 0.6 for s in sizes]
    blocks = [b | b.T | np.eye(len(b), dtype=bool) for b in blocks]
    return sp.block_diag([sp.coo_array(b) for b in blocks], format="csr").toarray().astype(bool)


# ---------------------------------------------------------------- brute-force oracles


def assert_column_coloring(d, colors):
    """No two columns sharing a row have the same color."""
    d = np.asarray(d, dtype=bool)
    assert colors.shape == (d.shape[1],) and colors.dtype.kind == "i"
    if d.shape[1]:
        assert colors.min() >= 0 and set(np.unique(colors)) == set(range(colors.max() + 1))
    for i in range(d.shape[0]):
        cols = np.flatnonzero(d[i])
        for a, b in itertools.combinations(cols, 2):
            assert colors[a] != colors[b], f"columns {a}, {b} share row {i} and color {colors[a]}"


def assert_star_coloring(d, colors):
    """Distance-1 coloring, and no path a-b-c-d on 4 distinct vertices colored with only 2 colors."""
    d = np.asarray(d, dtype=bool).copy()
    np.fill_diagonal(d, False)
    n = d.shape[0]
    assert colors.shape == (n,) and colors.dtype.kind == "i"
    nbrs = [set(np.flatnonzero(d[v])) for v in range(n)]
    for u in range(n):
        for v in nbrs[u]:
            assert colors[u] != colors[v], f"adjacent {u}, {v} share color {colors[u]}"
    for b in range(n):
        for c in nbrs[b]:
            for a in nbrs[b] - {c}:
                if colors[a] != colors[c]:
                    continue
                for x in nbrs[c] - {a, b}:
                    assert colors[x] != colors[b], f"path {a}-{b}-{c}-{x} uses 2 colors"


def random_values_with(rng, d, complex_=False):
    vals = rng.standard_normal(d.shape)
    if complex_:
        vals = vals + 1j * rng.standard_normal(d.shape)
    return np.where(d, vals, 0)


def assert_recovers(d, colors, symmetric, rng, complex_=False):
    """Random J (or symmetric H) with pattern d; B = J @ S; the recovery gives J exactly."""
    a = random_values_with(rng, d, complex_)
    if symmetric:
        a = np.triu(a) + np.triu(a, 1).T
    a[np.asarray(d, dtype=bool) & (rng.random(d.shape) < 0.1)] = 0  # some values happen to be 0
    if symmetric:
        a = np.triu(a) + np.triu(a, 1).T
    rec = compressed_recovery(sp.csr_array(d), colors, symmetric=symmetric)
    assert isinstance(rec, Recovery)
    s = seed_matrix(colors)
    b = a @ s
    out = rec.csr(b)
    assert isinstance(out, sp.csr_array)
    assert out.dtype == (np.complex128 if complex_ else np.float64)
    # the canonical structure of the pattern, explicit zeros included
    ref = sp.csr_array(np.asarray(d, dtype=bool))
    assert out.nnz == ref.nnz and out.has_sorted_indices
    np.testing.assert_array_equal(out.indptr, ref.indptr)
    np.testing.assert_array_equal(out.indices, ref.indices)
    np.testing.assert_array_equal(out.toarray(), a)
    np.testing.assert_array_equal(rec.dense(b), a)
    return rec, a, b


# ---------------------------------------------------------------- known color counts


@pytest.mark.parametrize("n", [3, 4, 10, 101])
def test_tridiagonal_takes_three_colors(n):
    d = tridiagonal(n)
    for order in ("best", "largest_first", "natural"):
        col = column_coloring(sp.csr_array(d), order=order)
        star = star_coloring(sp.csr_array(d), order=order)
        assert col.max() + 1 == 3
        assert star.max() + 1 == (2 if n == 3 else 3)  # the path on 3 vertices is a star
        assert_column_coloring(d, col)
        assert_star_coloring(d, star)


@pytest.mark.parametrize("n", [2, 3, 9, 50])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_arrowhead_star_coloring_takes_two_colors(n, where):
    hub = {"first": 0, "middle": n // 2, "last": n - 1}[where]
    d = arrowhead(n, hub)
    colors = star_coloring(sp.coo_array(d))
    assert colors.max() + 1 == 2
    assert star_coloring(sp.coo_array(d), order="largest_first").max() + 1 == 2
    assert_star_coloring(d, colors)
    assert_recovers(d, colors, True, np.random.default_rng(n))
    # Without its diagonal the pattern is a star graph too.
    np.fill_diagonal(d, False)
    d[hub, hub] = False
    assert star_coloring(sp.csr_array(d)).max() + 1 == 2
    # A dense row forces every column to its own color.
    assert column_coloring(sp.csr_array(d | np.eye(n, dtype=bool))).max() + 1 == n


@pytest.mark.parametrize("n", [1, 2, 7, 100])
def test_diagonal_takes_one_color(n):
    d = sp.eye_array(n, format="csr", dtype=bool)
    assert column_coloring(d).tolist() == [0] * n
    assert star_coloring(d).tolist() == [0] * n
    assert_recovers(d.toarray(), np.zeros(n, dtype=np.int64), True, np.random.default_rng(0))
    assert_recovers(d.toarray(), np.zeros(n, dtype=np.int64), False, np.random.default_rng(1))


def test_block_diagonal_needs_the_largest_block_for_columns():
    rng = np.random.default_rng(5)
    d = block_diagonal(rng, [4, 1, 6, 3])
    col = column_coloring(sp.csr_array(d))
    assert_column_coloring(d, col)
    star = star_coloring(sp.csr_array(d))
    assert_star_coloring(d, star)
    assert star.max() <= col.max() <= 5  # blocks are colored independently; a block has at most 6 columns
    assert_recovers(d, star, True, rng)
    assert_recovers(d, col, False, rng)


# ---------------------------------------------------------------- random patterns


@pytest.mark.parametrize("seed", range(6))
def test_random_banded_jacobians(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(1, 40, size=2)
    lower, upper = rng.integers(0, 4, size=2)
    d = banded(rng, m, n, lower, upper, fill=rng.uniform(0.5, 1.0))
    d[:, rng.integers(0, n)] = False  # an empty column
    d[rng.integers(0, m), :] = False  # an empty row
    width = lower + upper + 1  # columns j, j' share a row only if |j - j'| < width
    counts = {}
    for order in ("best", "largest_first", "natural", rng.permutation(n)):
        colors = column_coloring(sp.csr_array(d), order=order)
        assert_column_coloring(d, colors)
        counts[str(order)] = colors.max() + 1
        assert counts[str(order)] <= 2 * width - 1  # max degree + 1
        assert_recovers(d, colors, False, rng)
    assert counts["natural"] <= width  # natural order sees at most width - 1 earlier neighbours
    assert counts["best"] == min(counts["natural"], counts["largest_first"])


@pytest.mark.parametrize("seed", range(6))
def test_random_symmetric_hessians(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 60))
    d = random_symmetric(rng, n, rng.uniform(0.01, 0.2), diagonal=bool(seed % 2))
    star = star_coloring(sp.csr_array(d))
    assert_star_coloring(d, star)
    assert_recovers(d, star, True, rng)
    assert_recovers(d, star, True, rng, complex_=True)
    col = column_coloring(sp.csr_array(d))
    assert_column_coloring(d, col)
    assert_recovers(d, col, False, rng)
    # A distance-2 coloring (column coloring with the diagonal set) is also a star coloring.
    assert_star_coloring(d, column_coloring(sp.csr_array(d | np.eye(n, dtype=bool))))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), density=st.floats(0.0, 0.3), diagonal=st.booleans(), seed=st.integers(0, 2**31),
       natural=st.booleans())
def test_star_coloring_property(n, density, diagonal, seed, natural):
    rng = np.random.default_rng(seed)
    d = random_symmetric(rng, n, density, diagonal)
    colors = star_coloring(sp.csr_array(d), order="natural" if natural else "largest_first")
    assert_star_coloring(d, colors)
    best = star_coloring(sp.csr_array(d))
    assert_star_coloring(d, best)
    other = star_coloring(sp.csr_array(d), order="largest_first" if natural else "natural")
    assert best.max() == min(colors.max(), other.max())
    assert_recovers(d, colors, True, rng)


@settings(max_examples=60, deadline=None)
@given(m=st.integers(0, 25), n=st.integers(0, 25), density=st.floats(0.0, 0.4), seed=st.integers(0, 2**31))
def test_column_coloring_property(m, n, density, seed):
    rng = np.random.default_rng(seed)
    d = rng.random((m, n)) < density
    colors = column_coloring(sp.csr_array(d))
    assert_column_coloring(d, colors)
    if n:
        # greedy never needs more than (max degree of the column intersection graph) + 1 colors
        inter = (d.T.astype(int) @ d.astype(int)) > 0
        np.fill_diagonal(inter, False)
        assert colors.max() + 1 <= inter.sum(axis=1).max() + 1
        assert colors.max() + 1 >= d.sum(axis=1).max(initial=0)  # a row's columns all differ
    assert_recovers(d, colors, False, rng)


# ---------------------------------------------------------------- inputs and details


def test_pattern_formats_and_stored_false_entries():
    d = tridiagonal(6)
    ref_col, ref_star = column_coloring(sp.csr_array(d)), star_coloring(sp.csr_array(d))
    forms = (d, d.astype(float), sp.csr_matrix(d), sp.coo_array(d), sp.csc_array(d.astype(np.int8)), sp.lil_array(d))
    for form in forms:
        np.testing.assert_array_equal(column_coloring(form), ref_col)
        np.testing.assert_array_equal(star_coloring(form), ref_star)
    # A stored False (or 0) is not part of the pattern; duplicate coordinates are one entry.
    rows, cols = np.nonzero(d)
    extra = sp.coo_array((np.r_[np.ones(len(rows), bool), False, True], (np.r_[rows, 0, 1], np.r_[cols, 5, 0])),
                         shape=d.shape)
    np.testing.assert_array_equal(star_coloring(extra), ref_star)
    rec = compressed_recovery(extra, ref_star, symmetric=True)
    assert rec.csr(d.astype(float) @ seed_matrix(ref_star)).nnz == d.sum()


def test_seed_matrix():
    s = seed_matrix(np.array([2, 0, 1, 0]))
    np.testing.assert_array_equal(s, [[0, 0, 1], [1, 0, 0], [0, 1, 0], [1, 0, 0]])
    assert s.dtype == np.float64
    assert seed_matrix(np.zeros(0, dtype=int)).shape == (0, 0)


def test_symmetric_recovery_is_exactly_symmetric_even_with_rounding():
    rng = np.random.default_rng(3)
    d = random_symmetric(rng, 40, 0.1)
    colors = star_coloring(sp.csr_array(d))
    rec = compressed_recovery(sp.csr_array(d), colors, symmetric=True)
    h = random_values_with(rng, d)
    h = h + h.T
    b = h @ seed_matrix(colors)
    b = b * (1 + 1e-12 * rng.standard_normal(b.shape))  # HVPs computed with rounding
    out = rec.csr(b)
    assert (out != out.T).nnz == 0
    np.testing.assert_allclose(out.toarray(), h, rtol=1e-10)


def test_upper_entries_are_read_in_their_row_when_possible():
    # Arrowhead, hub 0: row 0 holds every leaf (one color), so H[0, j] is read in row j: B[j, color(0)].
    d = arrowhead(5, 0)
    colors = star_coloring(sp.csr_array(d))
    rec = compressed_recovery(sp.csr_array(d), colors, symmetric=True)
    b = np.arange(10.0).reshape(5, 2)
    out = rec.dense(b)
    c0, c1 = colors[0], colors[1]
    np.testing.assert_array_equal(out[0, 1:], b[1:, c0])
    np.testing.assert_array_equal(out[1:, 0], b[1:, c0])
    assert out[0, 0] == b[0, c0]
    np.testing.assert_array_equal(np.diag(out)[1:], b[1:, c1])


def test_empty_and_tiny_patterns():
    for shape in [(0, 0), (3, 0), (0, 3), (1, 1), (4, 4)]:
        p = sp.csr_array(shape, dtype=bool)
        colors = column_coloring(p)
        assert colors.shape == (shape[1],) and not colors.any()
        rec = compressed_recovery(p, colors, symmetric=False)
        b = np.zeros((shape[0], 1 if shape[1] else 0))
        assert rec.csr(b).nnz == 0 and rec.dense(b).shape == shape
        if shape[0] == shape[1]:
            assert star_coloring(p).tolist() == [0] * shape[0]
    one = sp.csr_array(np.ones((1, 1), dtype=bool))
    assert column_coloring(one).tolist() == star_coloring(one).tolist() == [0]
    rec = compressed_recovery(one, [0], symmetric=True)
    np.testing.assert_array_equal(rec.dense(np.array([[2.5]])), [[2.5]])


def test_integer_b_becomes_float64():
    d = tridiagonal(5)
    colors = column_coloring(sp.csr_array(d))
    rec = compressed_recovery(sp.csr_array(d), colors, symmetric=False)
    j = np.where(d, np.arange(25).reshape(5, 5), 0)
    out = rec.csr(j @ seed_matrix(colors).astype(int))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.toarray(), j)


# ---------------------------------------------------------------- errors


def test_bad_inputs_have_clear_errors():
    tri = sp.csr_array(tridiagonal(4))
    with pytest.raises(ValueError, match=r"must be square, got shape \(3, 4\).*column_coloring"):
        star_coloring(sp.csr_array(np.ones((3, 4), dtype=bool)))
    lower = np.tril(np.ones((3, 3), dtype=bool))
    msg = r"not symmetric: entry \(1, 0\) is set but \(0, 1\) is not.*pattern \+ pattern.T"
    with pytest.raises(ValueError, match=msg):
        star_coloring(sp.csr_array(lower))
    with pytest.raises(ValueError, match="not symmetric"):
        compressed_recovery(sp.csr_array(lower), [0, 1, 2], symmetric=True)
    with pytest.raises(TypeError, match="2-D"):
        column_coloring(np.ones(3))
    with pytest.raises(TypeError, match="2-D"):
        column_coloring("abc")
    with pytest.raises(ValueError, match="unknown order 'smallest'"):
        column_coloring(tri, order="smallest")
    with pytest.raises(ValueError, match=r"permutation of range\(4\)"):
        star_coloring(tri, order=[0, 1, 1, 3])
    with pytest.raises(ValueError, match=r"length 4 \(one per column\), got shape \(3,\)"):
        compressed_recovery(tri, [0, 1, 2], symmetric=False)
    with pytest.raises(ValueError, match="must be >= 0"):
        compressed_recovery(tri, [0, 1, -1, 0], symmetric=False)
    with pytest.raises(ValueError, match="must be integers"):
        compressed_recovery(tri, [0.0, 1.0, 2.0, 0.0], symmetric=False)
    rec = compressed_recovery(tri, column_coloring(tri), symmetric=False)
    with pytest.raises(ValueError, match=r"B has shape \(4, 2\); expected \(4, 3\).*seed_matrix"):
        rec.csr(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"B has shape \(4,\)"):
        rec.dense(np.zeros(4))


def test_a_huge_dense_row_is_refused_before_allocating():
    n = 12_000  # one dense row: 1.44e8 column pairs
    p = sp.csr_array((np.ones(n + 5, bool), (np.r_[np.zeros(n, int), 1 + np.arange(5)], np.r_[np.arange(n), 0:5])),
                     shape=(6, n))
    with pytest.raises(ValueError, match=r"row 0 of the pattern has 12000 of its 12000 columns set.*densely"):
        column_coloring(p)


def test_invalid_colorings_are_rejected_naming_the_entry():
    tri = sp.csr_array(tridiagonal(4))
    with pytest.raises(ValueError, match=r"columns 0 and 1 both have color 0 and share row 0.*column_coloring"):
        compressed_recovery(tri, [0, 0, 1, 2], symmetric=False)
    # Distance-1 but not star on a path of 4 vertices: 0-1-2-3 colored 0,1,0,1.
    path = sp.csr_array(tridiagonal(4))
    with pytest.raises(ValueError, match=r"entry \(1, 2\) cannot be recovered.*star_coloring"):
        compressed_recovery(path, [0, 1, 0, 1], symmetric=True)
    # Adjacent vertices of one color with the diagonal set.
    with pytest.raises(ValueError, match=r"entry \(0, 0\) cannot be recovered"):
        compressed_recovery(path, [0, 0, 1, 2], symmetric=True)
    # A valid star coloring that is not a column coloring is fine for symmetric recovery only.
    star = [0, 1, 0, 2]
    assert_star_coloring(tridiagonal(4), np.array(star))
    assert_recovers(tridiagonal(4), np.array(star), True, np.random.default_rng(0))
    with pytest.raises(ValueError, match="share row 1"):
        compressed_recovery(path, star, symmetric=False)
