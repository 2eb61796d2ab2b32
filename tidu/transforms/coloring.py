"""Graph coloring for compressed evaluation of sparse Jacobians and Hessians.

A Jacobian ``J`` (m, n) whose columns fall into ``k`` groups ("colors") such that no two columns of
a group share a nonzero row is recovered from ``k`` JVPs: ``B = J @ S`` with the seed matrix
``S[j, colors[j]] = 1`` holds ``J[i, j]`` at ``B[i, colors[j]]``. For a symmetric Hessian a star
coloring (Gebremedhin, Manne, Pothen, "What color is your Jacobian?", SIAM Review 2005) needs fewer
colors: every entry is read either in its own row or, by symmetry, in its column.

- :func:`column_coloring` colors the columns of a Jacobian pattern (distance-2 coloring of the
  bipartite row/column graph, i.e. a distance-1 coloring of the column intersection graph).
- :func:`star_coloring` colors the adjacency graph of a symmetric Hessian pattern so that every
  path on four vertices uses at least three colors.
- :func:`seed_matrix` builds ``S``; :func:`compressed_recovery` precomputes index arrays so that
  :meth:`Recovery.csr` and :meth:`Recovery.dense` rebuild the matrix from ``B`` with vectorized NumPy.

Both colorings are greedy over a vertex order; by default two orders are tried (largest degree first,
then natural order, abandoned as soon as it needs as many colors) and the fewer colors kept. Building the
graphs and the recovery indices is vectorized with SciPy/NumPy; the greedy loop itself is a tight
Python loop over vertices with integer bitmasks for color sets, linear in the number of edges for
bounded color counts (a star-colored vertex of degree d costs O(d) however large the degrees of its
neighbours, thanks to per-vertex summaries kept up to date as colors are assigned).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "MAX_INTERSECTION_ENTRIES", "Recovery", "column_coloring", "compressed_recovery", "seed_matrix", "star_coloring",
]

Order = str | np.ndarray | list[int] | tuple[int, ...]

#: column_coloring refuses patterns whose column intersection graph (sum over rows of nnz**2) exceeds this.
MAX_INTERSECTION_ENTRIES = 100_000_000


def _canonical(pattern: Any, what: str = "pattern") -> sp.csr_array:
    """``pattern`` as a boolean CSR array with sorted, unique indices and no stored False entries."""
    if not sp.issparse(pattern):
        try:
            arr = np.asarray(pattern)
        except Exception as e:
            raise TypeError(f"{what} must be a scipy.sparse array or a 2-D array, got {type(pattern).__name__}") from e
        if arr.ndim != 2 or arr.dtype == object:
            raise TypeError(f"{what} must be a 2-D scipy.sparse array (or a 2-D NumPy array), "
                            f"got {type(pattern).__name__} with shape {arr.shape} and dtype {arr.dtype}")
        pattern = arr
    if len(pattern.shape) != 2:
        raise TypeError(f"{what} must be 2-D, got shape {pattern.shape}")
    csr = sp.csr_array(pattern)
    data = np.asarray(csr.data != 0, dtype=bool)
    out = sp.csr_array((data, csr.indices.copy(), csr.indptr.copy()), shape=csr.shape)
    out.sum_duplicates()  # sorts the indices; OR of duplicate booleans
    out.eliminate_zeros()
    return out


def _orders(order: Order, degrees: np.ndarray, what: str) -> list[np.ndarray]:
    """The vertex orders to try: ``"best"`` is largest-first then natural; else the one order asked for."""
    n = degrees.shape[0]
    if isinstance(order, str):
        largest_first = np.argsort(-degrees, kind="stable")
        if order == "best":
            return [largest_first, np.arange(n)]
        if order == "largest_first":
            return [largest_first]
        if order == "natural":
            return [np.arange(n)]
        raise ValueError(f"{what}: unknown order {order!r}; use 'best', 'largest_first', 'natural' "
                         "or a permutation of range(n)")
    perm = np.asarray(order)
    if perm.shape != (n,) or not np.issubdtype(perm.dtype, np.integer) or \
            not np.array_equal(np.sort(perm), np.arange(n)):
        raise ValueError(f"{what}: order must be a permutation of range({n}) (integers, each once)")
    return [perm.astype(np.intp)]


def _fewest(runs: list[np.ndarray], attempt: Any, floor: int) -> np.ndarray:
    """Run ``attempt(perm, limit)`` for each order; keep the coloring with the fewest colors (the first on ties).

    ``attempt`` returns None as soon as it would need ``limit`` colors, so a worse order costs little;
    no further order is tried once a coloring reaches ``floor``, a lower bound on the number of colors.
    """
    best: np.ndarray | None = None
    for perm in runs:
        if best is not None and int(best.max()) + 1 <= floor:
            break
        limit = int(best.max()) + 1 if best is not None else None
        colors = attempt(perm, limit)
        if colors is not None:
            best = colors
    assert best is not None
    return best


def _without_diagonal(adj: sp.csr_array) -> sp.csr_array:
    """``adj`` with its diagonal entries removed (a boolean CSR array)."""
    coo = adj.tocoo()
    keep = coo.row != coo.col
    out = sp.csr_array((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=adj.shape)
    out.sum_duplicates()
    return out


def column_coloring(pattern: Any, order: Order = "best") -> np.ndarray:
    """Greedy coloring of the columns of a Jacobian sparsity pattern.

    ``pattern`` is a scipy.sparse (or dense) array of shape (m, n); its nonzero entries are the
    structure. Returns an int64 array ``colors`` of length n with values ``0..k-1`` such that no two
    columns with a nonzero in a common row share a color, so ``J`` is recovered from the ``k``
    products ``J @ seed_matrix(colors)``. ``order`` is ``"largest_first"`` (columns meeting the most
    other columns first, ties by index), ``"natural"``, an explicit permutation of ``range(n)``, or
    ``"best"`` (default: both, keeping the one with fewer colors; natural order suits banded patterns).

    A tridiagonal pattern gets 3 colors, a diagonal one 1. A row with r entries forces at least r
    colors; patterns whose column intersection graph would exceed ``MAX_INTERSECTION_ENTRIES`` entries
    (the sum over rows of r**2) are refused with a ValueError instead of exhausting memory.
    """
    p = _canonical(pattern)
    n = p.shape[1]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    per_row = np.diff(p.indptr).astype(np.int64)
    if int((per_row**2).sum()) > MAX_INTERSECTION_ENTRIES:
        i = int(np.argmax(per_row))
        raise ValueError(f"column_coloring: row {i} of the pattern has {int(per_row[i])} of its {n} columns set, so "
                         f"compression needs at least that many colors and the column intersection graph would have "
                         f"~{int((per_row**2).sum()):.2e} entries; evaluate this Jacobian densely or by reverse mode")
    # Column intersection graph: columns j, j' adjacent iff they share a row (boolean product: no cancellation).
    inter = _without_diagonal(sp.csr_array(p.T @ p))
    floor = max(1, int(np.diff(p.indptr).max(initial=0)))  # the columns of one row all differ
    return _fewest(_orders(order, np.diff(inter.indptr), "column_coloring"),
                   lambda perm, limit: _greedy_columns(inter, perm, limit), floor)


def _greedy_columns(inter: sp.csr_array, perm: np.ndarray, limit: int | None) -> np.ndarray | None:
    """Greedy distance-1 coloring of ``inter`` in the order ``perm``; None once ``limit`` colors are needed."""
    n = perm.shape[0]
    # Relabel so that position in the order is the vertex number; keep only neighbours colored earlier.
    natural = bool(np.array_equal(perm, np.arange(n)))
    permuted = inter if natural else sp.csr_array(inter[perm][:, perm])
    earlier = sp.csr_array(sp.tril(permuted, k=-1, format="csr"))
    ptr = earlier.indptr.tolist()
    idx = earlier.indices.tolist()
    top = n if limit is None else limit
    bits = [0] * n  # bits[p] = 1 << color of the vertex at position p
    by_pos = [0] * n
    for pos in range(n):
        used = 0
        for w in idx[ptr[pos]:ptr[pos + 1]]:
            used |= bits[w]
        c = (~used & (used + 1)).bit_length() - 1  # smallest color not used
        if c >= top:
            return None
        by_pos[pos] = c
        bits[pos] = 1 << c
    colors = np.empty(n, dtype=np.int64)
    colors[perm] = by_pos
    return colors


def _square_symmetric(pattern: Any, what: str) -> sp.csr_array:
    p = _canonical(pattern)
    if p.shape[0] != p.shape[1]:
        raise ValueError(f"{what}: a Hessian pattern must be square, got shape {p.shape}; "
                         "for a rectangular Jacobian use column_coloring")
    diff = sp.csr_array(p != sp.csr_array(p.T))
    if diff.nnz:
        coo = diff.tocoo()
        order = np.lexsort((coo.col, coo.row))
        i, j = int(coo.row[order[0]]), int(coo.col[order[0]])
        if not p[i, j]:
            i, j = j, i
        raise ValueError(f"{what}: pattern is not symmetric: entry ({i}, {j}) is set but ({j}, {i}) is not; "
                         "pass pattern + pattern.T (a Hessian's pattern is symmetric)")
    return p


def star_coloring(pattern: Any, order: Order = "best") -> np.ndarray:
    """Greedy star coloring of a symmetric (Hessian) sparsity pattern.

    ``pattern`` is a symmetric scipy.sparse (or dense) array of shape (n, n); the diagonal may or may
    not be set (it is ignored). Returns an int64 array ``colors`` of length n with values ``0..k-1``:
    adjacent vertices get different colors and every path on four vertices uses at least three colors,
    so a symmetric ``H`` is recovered from ``H @ seed_matrix(colors)`` (see :func:`compressed_recovery`).

    The greedy rule is the one of Gebremedhin, Manne and Pothen (2005): vertex v may not take the color
    of a colored neighbour w; nor the color of a colored neighbour x of w when w is uncolored, or when
    w is colored and x has another neighbour y != w of w's color. ``order`` is ``"largest_first"``
    (ties by index), ``"natural"``, a permutation of ``range(n)`` or ``"best"`` (default: both, keeping
    the fewer colors; largest-first puts the hub of an arrowhead first wherever it is). Tridiagonal
    patterns get 3 colors, an arrowhead (one dense row and column) 2, a diagonal 1.
    """
    p = _without_diagonal(_square_symmetric(pattern, "star_coloring"))
    n = p.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    # Lower bound: an edge u-v with further neighbours on both sides lies on a 4-vertex path or a triangle (3 colors).
    degrees = np.diff(p.indptr)
    rows = np.repeat(np.arange(n), degrees)
    floor = 3 if bool(np.any((degrees[rows] >= 2) & (degrees[p.indices] >= 2))) else 2 if p.nnz else 1
    return _fewest(_orders(order, degrees, "star_coloring"),
                   lambda perm, limit: _greedy_star(p, perm, limit), floor)


def _greedy_star(p: sp.csr_array, perm: np.ndarray, limit: int | None) -> np.ndarray | None:
    """Greedy star coloring of the graph ``p`` (no diagonal) in the order ``perm``; None once ``limit`` colors
    are needed."""
    n = p.shape[0]
    top = n if limit is None else limit
    ptr = p.indptr.tolist()
    idx = p.indices.tolist()
    color = [-1] * n
    around = [0] * n  # colors of the colored neighbours of u (bitmask)
    multi = [0] * n  # colors held by at least two colored neighbours of u
    forbid2 = [0] * n  # for colored w: colors of colored x in N(w) having another neighbour of w's color
    first: dict[int, int] = {}  # (color * n + u) -> the first neighbour of u that got that color
    for v in perm.tolist():
        nb = idx[ptr[v]:ptr[v + 1]]
        forb = 0
        for w in nb:
            cw = color[w]
            if cw < 0:
                forb |= around[w]
            else:
                forb |= (1 << cw) | forbid2[w]
        c = (~forb & (forb + 1)).bit_length() - 1
        if c >= top:
            return None
        color[v] = c
        bit = 1 << c
        mv = multi[v]
        if mv:  # v now colored: it forbids c next to each neighbour whose color v already sees twice
            for u in nb:
                cu = color[u]
                if cu >= 0 and (mv >> cu) & 1:
                    forbid2[u] |= bit
        key = n * c
        for u in nb:
            a = around[u]
            if a & bit:  # u already had a neighbour of color c
                cu = color[u]
                if cu >= 0:
                    ubit = 1 << cu
                    forbid2[v] |= ubit
                    if not multi[u] & bit:
                        forbid2[first[key + u]] |= ubit
                multi[u] |= bit
            else:
                around[u] = a | bit
                first[key + u] = v
    return np.asarray(color, dtype=np.int64)


def _check_colors(colors: Any, n: int, what: str) -> np.ndarray:
    arr = np.asarray(colors)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{what}: colors must be a 1-D array of length {n} (one per column), got shape {arr.shape}")
    if n and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{what}: colors must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if n and arr.min() < 0:
        raise ValueError(f"{what}: colors must be >= 0, got {int(arr.min())} at column {int(np.argmin(arr))}")
    return arr


def seed_matrix(colors: Any) -> np.ndarray:
    """The seed matrix ``S`` (n, k), float64, with ``S[j, colors[j]] = 1`` and zeros elsewhere.

    ``k = max(colors) + 1``; ``J @ S`` (k JVPs) or ``H @ S`` (k Hessian-vector products) is the
    compressed matrix ``B`` that :meth:`Recovery.csr` decompresses.
    """
    arr = np.asarray(colors)
    c = _check_colors(arr, arr.shape[0] if arr.ndim == 1 else -1, "seed_matrix")
    n = c.shape[0]
    k = int(c.max()) + 1 if n else 0
    s = np.zeros((n, k), dtype=np.float64)
    s[np.arange(n), c] = 1.0
    return s


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Recovery:
    """Precomputed index arrays decompressing ``B = J @ S`` (or ``H @ S``) into the sparse matrix.

    Made by :func:`compressed_recovery`. Entry ``e`` of the canonical CSR structure (``indptr``,
    ``indices``) of the pattern takes the value ``B[src_row[e], src_col[e]]``.
    """

    shape: tuple[int, int]
    num_colors: int
    symmetric: bool
    colors: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    rows: np.ndarray
    src_row: np.ndarray
    src_col: np.ndarray

    def _values(self, b: Any) -> np.ndarray:
        arr = np.asarray(b)
        m, k = self.shape[0], self.num_colors
        if arr.shape != (m, k):
            raise ValueError(f"B has shape {arr.shape}; expected ({m}, {k}) = (rows of the pattern, number of colors): "
                             "B = J @ seed_matrix(colors)")
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
            raise TypeError(f"B must be a numeric array, got dtype {arr.dtype}")
        dtype = np.result_type(arr.dtype, np.float64)
        return arr[self.src_row, self.src_col].astype(dtype, copy=False)

    def csr(self, b: Any) -> sp.csr_array:
        """The matrix as a ``scipy.sparse.csr_array`` with the canonical (sorted) structure of the pattern.

        Every pattern entry is stored, also where its value is 0. dtype float64, or complex128 for
        complex ``B``.
        """
        vals = self._values(b)
        return sp.csr_array((vals, self.indices.copy(), self.indptr.copy()), shape=self.shape)

    def dense(self, b: Any) -> np.ndarray:
        """The matrix as a dense NumPy array (zeros outside the pattern)."""
        vals = self._values(b)
        out = np.zeros(self.shape, dtype=vals.dtype)
        out[self.rows, self.indices] = vals
        return out


def _index_dtype(*arrays: np.ndarray) -> type:
    top = max((int(a.max()) for a in arrays if a.size), default=0)
    return np.int32 if top < np.iinfo(np.int32).max else np.int64


def compressed_recovery(pattern: Any, colors: Any, symmetric: bool) -> Recovery:
    """Index arrays to rebuild a sparse matrix with structure ``pattern`` from ``B = A @ seed_matrix(colors)``.

    ``symmetric=False`` (Jacobian, ``colors`` from :func:`column_coloring`): ``J[i, j] = B[i, colors[j]]``;
    raises ValueError if two columns of one color share a row.

    ``symmetric=True`` (Hessian, ``colors`` from :func:`star_coloring`; ``pattern`` must be square and
    symmetric): ``H[i, j] = B[i, colors[j]]`` when ``j`` is the only column of its color in row ``i``,
    else ``B[j, colors[i]]`` (then ``i`` is the only one of its color in row ``j``). The diagonal is
    read directly. Each pair ``(i, j)``, ``(j, i)`` is read from one place (chosen for ``i < j``), so
    the result is exactly symmetric. Raises ValueError naming the entry when neither read is valid
    (the coloring is not a star coloring of the pattern).
    """
    what = "compressed_recovery"
    p = _square_symmetric(pattern, what) if symmetric else _canonical(pattern)
    m, n = p.shape
    c = _check_colors(colors, n, what)
    k = int(c.max()) + 1 if n else 0
    indptr, indices = p.indptr.astype(np.int64), p.indices.astype(np.int64)
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(indptr))
    # How many columns of each color every row holds: unique (row, color) keys.
    key = rows * max(k, 1) + c[indices]
    _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
    alone = counts[inverse] == 1  # entry (i, j): j is the only column of its color in row i
    if not symmetric:
        if not alone.all():
            e = int(np.argmin(alone))
            i, j = int(rows[e]), int(indices[e])
            others = indices[(rows == i) & (c[indices] == c[j]) & (indices != j)]
            raise ValueError(f"{what}: columns {j} and {int(others[0])} both have color {int(c[j])} and share row {i}; "
                             "use colors from column_coloring(pattern)")
        src_row, src_col = rows, c[indices]
    else:
        # mirror[e]: the index of entry (j, i) for entry e = (i, j) (the pattern is symmetric).
        nnz = indices.shape[0]
        csc = sp.csr_array((np.arange(nnz), indices, indptr), shape=(n, n)).tocsc()
        csc.sort_indices()
        # csc.data[t] is the csr index of the t-th entry in (column, row) order, whose transpose is the t-th
        # entry in (row, column) order, i.e. csr entry t.
        mirror = np.empty(nnz, dtype=np.int64)
        mirror[csc.data] = np.arange(nnz)
        up_ok_direct = alone
        up_ok_mirror = alone[mirror]
        bad = ~(up_ok_direct | up_ok_mirror)
        if bad.any():
            e = int(np.argmax(bad))
            i, j = int(rows[e]), int(indices[e])
            raise ValueError(f"{what}: entry ({i}, {j}) cannot be recovered: column {j} is not the only one of color "
                             f"{int(c[j])} in row {i}, nor is column {i} the only one of color {int(c[i])} in row {j}; "
                             "use colors from star_coloring(pattern)")
        direct_row, direct_col = rows, c[indices]
        # For the upper entry (i <= j): read in row i if possible, else in row j; the lower entry copies it.
        up_row = np.where(up_ok_direct, direct_row, indices)
        up_col = np.where(up_ok_direct, direct_col, c[rows])
        lower = rows > indices
        src_row = np.where(lower, up_row[mirror], up_row)
        src_col = np.where(lower, up_col[mirror], up_col)
    idt = _index_dtype(indptr, indices)
    return Recovery(
        shape=(m, n), num_colors=k, symmetric=bool(symmetric), colors=_readonly(c.copy()),
        indptr=_readonly(indptr.astype(idt)), indices=_readonly(indices.astype(idt)), rows=_readonly(rows.astype(idt)),
        src_row=_readonly(np.ascontiguousarray(src_row, dtype=np.intp)),
        src_col=_readonly(np.ascontiguousarray(src_col, dtype=np.intp)),
    )
