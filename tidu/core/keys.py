"""Structural global keys.

A value's identity is its structure: ``Input(key)`` for a graph input, or
``Derived(op, attrs, inputs, role, slot)`` for an output of a primitive. Keys are
hash-consed: building the same structure twice returns the same object, so equality
and hashing are O(1) (identity) whatever the depth of the term. Keys never hold
tensors; constants are ``Literal`` attributes compared by value.

These keys are the terms that ``materialize_merge`` loads into the e-graph.
"""

from __future__ import annotations

import math
import threading
import weakref
import zlib
from _weakref import _remove_dead_weakref  # type: ignore[attr-defined]
from dataclasses import dataclass
from typing import Any

import ml_dtypes  # noqa: F401 (registers bfloat16 with NumPy: np.dtype("bfloat16") works after it)
import numpy as np

DiffPassId = int

# ---------------------------------------------------------------------------
# dtypes and abstract values
# ---------------------------------------------------------------------------

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64", "complex64", "complex128")
_SHORT = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "f16", "bfloat16": "bf16",
    "float32": "f32", "float64": "f64",
    "complex64": "c64", "complex128": "c128",
}
# tuples, not sets: the predicates below are also asked about np.dtype objects, which equal
# their names but do not hash as them
INTEGER_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
UNSIGNED_DTYPES = ("uint8", "uint16", "uint32", "uint64")
_REAL_OF = {"complex64": "float32", "complex128": "float64"}
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
HALF_DTYPES = ("float16", "bfloat16")  # 16-bit floats (ml_dtypes' bfloat16)


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def is_integer(dtype: str) -> bool:
    """Signed or unsigned integer (not bool)."""
    return dtype in INTEGER_DTYPES


def is_unsigned(dtype: str) -> bool:
    return dtype in UNSIGNED_DTYPES


def holds_index_arithmetic(dtype: str, n: int) -> bool:
    """Integer ``dtype`` holds -n..2n: what counting an index into an axis of size n from
    the end and clamping it compute (an unsigned or too narrow one does not)."""
    info = np.iinfo(dtype)
    return info.min <= -n and info.max >= 2 * n


def is_complex(dtype: str) -> bool:
    return dtype in ("complex64", "complex128")


def is_inexact(dtype: str) -> bool:
    return is_float(dtype) or is_complex(dtype)


def real_dtype(dtype: str) -> str:
    """The real dtype underlying ``dtype`` (float64 for complex128)."""
    return _REAL_OF.get(dtype, dtype)


def complex_dtype(dtype: str) -> str:
    if dtype not in _COMPLEX_OF:
        raise TypeError(f"no complex dtype pairs with {dtype}")
    return _COMPLEX_OF[dtype]


_AVALS: dict[tuple, Aval] = {}  # (shape, dtype) -> the Aval made for it
MAX_INTERNED_AVALS = 1 << 16
_set = object.__setattr__


class Aval:
    """Abstract value: a static shape and a dtype name (one of ``DTYPES``). Immutable and
    interned: ``Aval(shape, dtype)`` gives back the object already made for an equal one,
    so the AD passes' aval comparisons (``a is b or a == b``) mostly stop at ``is``
    (equality still holds between avals made apart, as after unpickling)."""

    __slots__ = ("shape", "dtype", "_hash")
    __match_args__ = ("shape", "dtype")

    shape: tuple[int, ...]
    dtype: str

    def __new__(cls, shape: tuple[int, ...], dtype: str) -> Aval:
        try:
            hit = _AVALS.get((shape, dtype))
        except TypeError:  # an unhashable shape (a list): made below, as a tuple
            shape = tuple(shape)
            hit = _AVALS.get((shape, dtype))
        if hit is not None:
            return hit
        if dtype not in _SHORT:
            raise TypeError(f"unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
        self = object.__new__(cls)
        # the hash, made once: every op node and instruction holds an aval, and a graph's
        # signature (the compile cache's key) hashes them all
        _set(self, "shape", shape)
        _set(self, "dtype", dtype)
        _set(self, "_hash", hash((shape, dtype)))
        if len(_AVALS) >= MAX_INTERNED_AVALS:  # a process of very many shapes: start again
            _AVALS.clear()
        return _AVALS.setdefault((shape, dtype), self)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Aval is immutable: cannot assign {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Aval is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        return self is other or (type(other) is Aval and self._hash == other._hash  # type: ignore[union-attr]
                                 and self.shape == other.shape and self.dtype == other.dtype)  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Aval(shape={self.shape!r}, dtype={self.dtype!r})"

    def __reduce__(self) -> tuple:  # made again, not restored: hashes differ between processes
        return Aval, (self.shape, self.dtype)

    def __copy__(self) -> Aval:
        return self

    def __deepcopy__(self, memo: dict) -> Aval:
        return self

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __str__(self) -> str:
        return f"{_SHORT[self.dtype]}[{','.join(map(str, self.shape))}]"

    def with_dtype(self, dtype: str) -> Aval:
        return Aval(self.shape, dtype)

    def with_shape(self, shape: tuple[int, ...]) -> Aval:
        return Aval(tuple(shape), self.dtype)


def aval_of(value: Any) -> Aval:
    """The aval of a concrete NumPy value or Python scalar (Python floats are float64)."""
    arr = np.asarray(value)
    name = arr.dtype.name
    if name not in _SHORT:
        raise TypeError(f"unsupported dtype {name}; tidu handles {', '.join(DTYPES)}")
    return Aval(tuple(int(d) for d in arr.shape), name)


# ---------------------------------------------------------------------------
# input keys
# ---------------------------------------------------------------------------


class InputKey:
    """Names a graph input. ``tangent_of(pass)`` derives the key of its tangent."""

    __slots__ = ()

    def tangent_of(self, pass_id: DiffPassId) -> Tangent:
        return Tangent(self, pass_id)


@dataclass(frozen=True, slots=True)
class Named(InputKey):
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Tangent(InputKey):
    """Tangent of ``of`` made by linearize pass ``pass_id``; prints as ``x.t3``."""

    of: InputKey
    pass_id: DiffPassId

    def __str__(self) -> str:
        return f"{self.of}.t{self.pass_id}"


@dataclass(frozen=True, slots=True)
class Cotangent(InputKey):
    """Cotangent seed number ``index`` of transpose pass ``pass_id``; prints as ``ct3_0``."""

    pass_id: DiffPassId
    index: int

    def __str__(self) -> str:
        return f"ct{self.pass_id}_{self.index}"


def input_key(k: InputKey | str) -> InputKey:
    if isinstance(k, InputKey):
        return k
    if isinstance(k, str):
        return Named(k)
    raise TypeError(f"expected an InputKey or a name, got {type(k).__name__}")


# ---------------------------------------------------------------------------
# roles and attributes
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Role:
    """``Primary`` (mask is None) or ``Linearized(active_mask)``; part of identity."""

    active_mask: tuple[bool, ...] | None = None

    @property
    def is_linear(self) -> bool:
        return self.active_mask is not None

    def __str__(self) -> str:
        if self.active_mask is None:
            return "Primary"
        return "Linearized[" + ",".join("a" if a else "f" for a in self.active_mask) + "]"


PRIMARY = Role()


_ROLES: dict[tuple, Role] = {}  # mask -> its role: the AD passes ask for a few masks very often


def Linearized(mask: tuple[bool, ...] | list[bool]) -> Role:  # noqa: N802 (reads as a variant)
    """The role of a value in a linearized fragment: which primal inputs are active (``mask``)."""
    key = tuple(mask)
    role = _ROLES.get(key)
    if role is None:
        role = Role(tuple(bool(m) for m in key))
        if len(_ROLES) < 4096:
            _ROLES[key] = role
    return role


_HASHED_WORDS = 1 << 16
_DENSE_SPLAT = 4096  # splats up to this many elements keep a plain array (what small-array code expects)


def _splat_element(arr: np.ndarray) -> np.ndarray | None:
    """The first element as a 0-d array when a C-contiguous ``arr`` is all that element
    (bitwise; -0.0 is not 0.0, NaN payloads count), else None (also when empty)."""
    flat = arr.reshape(-1)
    if flat.size == 0:
        return None
    if flat.size > 1:
        raw = flat.view(np.uint8).reshape(flat.size, -1)
        probe = raw[[1, flat.size // 2, -1]]  # most non-splats differ early: no full pass for them
        if not (bool(np.all(probe == raw[:1])) and bool(np.all(raw == raw[:1]))):
            return None
    return flat[:1].reshape(()).copy()


def _words(arr: np.ndarray) -> np.ndarray:
    """A C-contiguous array's bits as one flat array of unsigned words (8 bytes when the
    size allows: compared fastest), without a copy."""
    raw = arr.reshape(-1).view(np.uint8)
    return raw.view(np.uint64) if raw.size % 8 == 0 else raw


_FILLED: dict[tuple, Literal] = {}  # Literal.filled's shared literals
_IDENTITIES: dict[tuple, Literal] = {}  # Literal.identity's small identities, shared the same way
MAX_FILLED = 4096


class Literal:
    """A constant tensor used as an attribute: hashed and compared by value (bits).

    Whether every element is the same (a splat) is found once, when the literal is made;
    a large splat keeps one element and ``array`` is a read-only broadcast view of it,
    so the ones and zeros that derivatives are full of cost no memory and no scans. A
    large identity basis (``Literal.identity``: the seed of a dense Jacobian) is made
    only when its values are read (``array``); until then it hashes and compares as the
    array it stands for, and back ends that build constants from their structure
    (StableHLO) never make it (``identity_size``)."""

    __slots__ = ("_array", "_hash", "_splat", "_identity", "_range")

    def __init__(self, value: Any, dtype: str | None = None) -> None:
        arr = np.array(value, dtype=dtype) if dtype is not None else np.array(value)
        self._own(arr)

    @classmethod
    def owning(cls, arr: np.ndarray) -> Literal:
        """A literal of ``arr`` itself, not a copy: for an array tidu just made and
        nothing else holds."""
        lit = cls.__new__(cls)
        lit._own(arr)
        return lit

    @classmethod
    def filled(cls, value: Any, shape: tuple[int, ...], dtype: Any) -> Literal:
        """The literal ``np.full(shape, value, dtype)``, made without that array (shared
        for a nonzero Python number and a dtype name: the rules' constants, made for
        every op they differentiate)."""
        ident = None
        if type(dtype) is str and type(shape) is tuple and type(value) in (int, float) and value and value == value:
            ident = (value, type(value), shape, dtype)  # (0.0 == -0.0, and nan != nan: left out)
            hit = _FILLED.get(ident)
            if hit is not None:
                return hit
        lit = cls._filled(value, shape, dtype)
        if ident is not None:
            if len(_FILLED) >= MAX_FILLED:
                _FILLED.clear()
            _FILLED[ident] = lit
        return lit

    @classmethod
    def _filled(cls, value: Any, shape: tuple[int, ...], dtype: Any) -> Literal:
        lit = cls.__new__(cls)
        one = np.array(value, dtype=dtype)
        if one.ndim:
            raise ValueError(f"Literal.filled takes one value, got an array of shape {one.shape}")
        if math.prod(shape) == 0:
            lit._own(np.zeros(shape, one.dtype))
        else:
            lit._set_splat(one, tuple(shape))
        return lit

    @classmethod
    def identity(cls, size: int, shape: tuple[int, ...], dtype: Any) -> Literal:
        """The literal ``np.eye(size, dtype=dtype).reshape(shape)`` (a basis of one-hot
        values), made without that array until its values are read."""
        shape = tuple(shape)
        dt = np.dtype(dtype)
        if math.prod(shape) != size * size:
            raise ValueError(f"an identity of size {size} has {size * size} elements, not the shape {shape}")
        if size * size <= _DENSE_SPLAT or (size * size * dt.itemsize) % 8:
            # (kept: every jacfwd and jacrev seeds a batch with one, and its checksum reads it all)
            ident = (size, shape, dt.str)
            hit = _IDENTITIES.get(ident)
            if hit is None:
                if len(_IDENTITIES) >= MAX_FILLED:
                    _IDENTITIES.clear()
                hit = _IDENTITIES[ident] = cls.owning(np.eye(size, dtype=dt).reshape(shape))
            return hit
        lit = cls.__new__(cls)
        lit._array, lit._splat, lit._range = None, None, (0.0, 1.0, True)
        lit._identity = (size, shape, dt)
        n_words = size * size * dt.itemsize // 8
        positions = np.arange(n_words) if n_words <= _HASHED_WORDS else np.concatenate(
            [np.arange(0, n_words, n_words // _HASHED_WORDS), [n_words - 1]])
        lit._hash = hash((dt.name, shape, zlib.crc32(_identity_words(size, dt, positions))))
        return lit

    def _own(self, arr: np.ndarray) -> None:
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            arr = arr.copy(order="C")
        self._identity, self._range = None, None
        one = _splat_element(arr)
        if one is not None:
            self._set_splat(one, arr.shape, arr if arr.size <= _DENSE_SPLAT else None)
            return
        arr.setflags(write=False)
        self._array = arr
        self._splat = None
        # a checksum of the bits read in place (no copy of a large constant), of an even
        # sample of them past 2^16 words: literals with equal hashes are told apart by
        # __eq__, which reads every bit
        words = _words(arr)
        if words.size > _HASHED_WORDS:
            words = np.concatenate([words[:: words.size // _HASHED_WORDS], words[-1:]])
        self._hash = hash((arr.dtype.name, arr.shape, zlib.crc32(words)))

    def _set_splat(self, one: np.ndarray, shape: tuple[int, ...], dense: np.ndarray | None = None) -> None:
        """A splat of the 0-d ``one``: small ones keep their array, large ones a view."""
        one.setflags(write=False)
        if dense is None:
            dense = np.broadcast_to(one, shape) if math.prod(shape) > _DENSE_SPLAT else np.full(shape, one)
        dense.setflags(write=False)
        self._array = dense
        self._splat = one
        self._identity, self._range = None, None
        self._hash = hash((one.dtype.name, shape, one.tobytes()))

    @property
    def array(self) -> np.ndarray:
        """The values (read-only); a lazy identity is made on the first read."""
        arr = self._array
        if arr is None:
            size, shape, dt = self._identity  # type: ignore[misc]
            arr = np.eye(size, dtype=dt).reshape(shape)
            arr.setflags(write=False)
            self._array = arr
        return arr

    @property
    def shape(self) -> tuple[int, ...]:
        return self._identity[1] if self._array is None else self._array.shape  # type: ignore[index]

    @property
    def dtype(self) -> np.dtype:
        return self._identity[2] if self._array is None else self._array.dtype  # type: ignore[index]

    @property
    def identity_size(self) -> int | None:
        """n when this is ``np.eye(n).reshape(shape)`` made by ``Literal.identity``."""
        return None if self._identity is None else self._identity[0]

    @property
    def aval(self) -> Aval:
        return Aval(self.shape, self.dtype.name) if self._array is None else aval_of(self._array)

    def finite_range(self) -> tuple[float, float, bool] | None:
        """(least, greatest, whether 0 occurs) of a real literal whose values are all
        finite, else None; found once."""
        if self._range is None:
            arr = self.array if self._splat is None else self._splat  # a splat: its one value
            if arr.size == 0 or arr.dtype.kind not in "iuf" or not bool(np.all(np.isfinite(arr))):
                self._range = False  # type: ignore[assignment]
            else:
                self._range = (float(arr.min()), float(arr.max()), bool(np.any(arr == 0)))
        return self._range or None

    def __reduce__(self) -> tuple:  # made again, not restored: the hash differs between processes
        if self._identity is not None:
            return Literal.identity, self._identity
        if self._splat is not None:
            return Literal.filled, (self._splat, self.array.shape, self._splat.dtype)
        return Literal, (self.array,)

    def splat(self) -> complex | float | int | bool | None:
        """The single value if every element is equal (bitwise), else None."""
        return None if self._splat is None else self._splat.item()

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not (isinstance(other, Literal) and self._hash == other._hash and self.dtype == other.dtype
                and self.shape == other.shape):
            return False
        if self._identity is not None and other._identity is not None:
            return self._identity == other._identity
        if (self._splat is None) != (other._splat is None):
            return False
        if self._splat is not None:
            return self._splat.tobytes() == other._splat.tobytes()  # type: ignore[union-attr]
        return bool(np.array_equal(_words(self.array), _words(other.array)))

    def __repr__(self) -> str:
        s = self.splat()
        if s is not None and len(self.shape) > 0:
            return f"fill({s!r})"
        if not self.shape:
            return repr(self.array.item())
        if math.prod(self.shape) <= 6:
            return np.array2string(self.array, separator=",").replace("\n", "")
        # a checksum of the bits, not hash(): the same in every process (listings are)
        return f"<{self.dtype.name}{list(self.shape)}#{zlib.crc32(_words(self.array)) & 0xFFFF:04x}>"


def _identity_words(size: int, dtype: np.dtype, positions: np.ndarray) -> np.ndarray:
    """The 8-byte words at ``positions`` of ``np.eye(size, dtype=dtype)``'s bytes,
    computed from the positions (what ``_words`` of the array would read there)."""
    s = dtype.itemsize
    if s <= 8:  # each word holds 8 // s whole elements
        k = 8 // s
        e = positions[:, None] * k + np.arange(k)
        vals = (e // size == e % size).astype(dtype)
        return np.ascontiguousarray(vals).view(np.uint64).reshape(-1)
    halves = s // 8  # each element spans several words (complex128: the real part, then the imaginary)
    e, part = positions // halves, positions % halves
    vals = (e // size == e % size).astype(dtype)
    words = np.ascontiguousarray(vals).view(np.uint64).reshape(-1, halves)
    return np.ascontiguousarray(words[np.arange(len(positions)), part])


_EMPTY_HASH = hash(())


class Attrs:
    """Immutable, hashable, ordered op attributes: ``Attrs(axes=(0,), shape=(3,))``."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: dict[str, Any] | None = None, **kw: Any) -> None:
        if not items:
            if not kw:
                self._items, self._hash = (), _EMPTY_HASH
                return
            if len(kw) == 1:  # Attrs(value=...): every constant
                ((k, v),) = kw.items()
                self._items = ((k, v if type(v) in _PLAIN else _freeze(v)),)
                self._hash = hash(self._items)
                return
        d = items if type(items) is dict and not kw else dict(items or {}, **kw)
        self._items = tuple(sorted([(k, _freeze(v)) for k, v in d.items()]))
        self._hash = hash(self._items)

    def __getitem__(self, name: str) -> Any:
        for k, v in self._items:
            if k == name:
                return v
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        for k, v in self._items:
            if k == name:
                return v
        return default

    def items(self) -> tuple[tuple[str, Any], ...]:
        return self._items

    def keys(self) -> list[str]:
        return [k for k, _ in self._items]

    def __contains__(self, name: str) -> bool:
        return any(k == name for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple:  # made again, not restored: the hash differs between processes
        return _restore_attrs, (self._items,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attrs) and self._items == other._items

    def __str__(self) -> str:
        return ", ".join(f"{k}={_fmt(v)}" for k, v in self._items)

    __repr__ = __str__


NO_ATTRS = Attrs()


def _restore_attrs(items: tuple[tuple[str, Any], ...]) -> Attrs:
    """An unpickled ``Attrs``: none is ``NO_ATTRS`` itself (fast paths test ``is NO_ATTRS``)."""
    return Attrs(dict(items)) if items else NO_ATTRS


_PLAIN = frozenset((int, float, str, bool, complex, type(None), Literal))  # attribute values kept as they are


def _freeze(v: Any) -> Any:
    if type(v) in _PLAIN:
        return v
    if isinstance(v, list | tuple):
        if type(v) is tuple and all([type(x) is int for x in v]):  # shapes, dims, axes: frozen already
            return v
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.ndarray):
        return Literal(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, dict):
        raise TypeError("op attributes must be hashable values, not dicts")
    hash(v)
    return v


def _fmt(v: Any) -> str:
    if isinstance(v, tuple):
        return "(" + ",".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    return repr(v) if isinstance(v, str) else str(v)


# ---------------------------------------------------------------------------
# value keys (hash-consed)
# ---------------------------------------------------------------------------

class _Ref(weakref.ref):
    """A weak reference that remembers its table key (for removal when the key dies)."""

    __slots__ = ("ident",)


def _forget(ref: _Ref) -> None:
    """Weakref callback: drop a dead key's entry, unless a new key took its place (atomic,
    as in ``weakref.WeakValueDictionary``)."""
    _remove_dead_weakref(_INTERN, ref.ident)


# structure -> weak reference to its key. A plain dict of weak references with a C-level
# look-up (``weakref.WeakValueDictionary`` costs two Python calls per look-up and creation,
# about 10 % of an AD pass). Look-ups are lock-free; creation is locked, so two threads
# building the same term at once get the same object (key equality is identity).
_INTERN: dict[tuple, _Ref] = {}
_INTERN_LOCK = threading.Lock()


def _interned(ident: tuple) -> ValueKey | None:
    ref = _INTERN.get(ident)
    return None if ref is None else ref()


def _intern(ident: tuple, v: ValueKey) -> None:
    ref = _Ref(v, _forget)
    ref.ident = ident
    _INTERN[ident] = ref


class ValueKey:
    """Hash-consed structural identity of a value. Build with ``Input`` or ``Derived``.

    Fields: ``input`` (the InputKey, for inputs), or ``op``, ``attrs``, ``inputs``,
    ``role``, ``slot`` (for derived values); ``aval`` is computed from the structure
    and is not part of the identity beyond what the structure already fixes (inputs carry
    their aval in their identity). Equality and hashing are by identity (object's own,
    in C: every dict of the AD passes is keyed by keys), which interning makes
    structural; nothing may depend on the hash values (they differ between processes).
    """

    __slots__ = ("input", "op", "attrs", "inputs", "role", "slot", "aval", "__weakref__")

    input: InputKey | None
    op: str | None
    attrs: Attrs
    inputs: tuple[ValueKey, ...]
    role: Role
    slot: int
    aval: Aval

    def __reduce__(self):  # keys are process-local interned objects
        raise TypeError("ValueKey cannot be pickled; serialize a MaterializedGraph instead")

    @property
    def is_input(self) -> bool:
        return self.input is not None

    def __repr__(self) -> str:
        if self.input is not None:
            return f"Input({self.input}: {self.aval})"
        n = len(self.inputs)
        extra = f", {self.attrs}" if self.attrs else ""
        role = "" if self.role is PRIMARY or not self.role.is_linear else f" {self.role}"
        slot = f"#{self.slot}" if self.slot else ""
        return f"{self.op}({n} in{extra}){slot}{role}: {self.aval}"


def Input(key: InputKey | str, aval: Aval) -> ValueKey:  # noqa: N802 (a term constructor)
    """The key of graph input ``key`` (a name or ``InputKey``) of shape and dtype ``aval``."""
    key = input_key(key)
    ident = ("I", key, aval)
    ref = _INTERN.get(ident)
    found = None if ref is None else ref()
    if found is not None:
        return found
    with _INTERN_LOCK:
        found = _interned(ident)
        if found is not None:
            return found
        v = object.__new__(ValueKey)
        v.input, v.op, v.attrs, v.inputs, v.role, v.slot, v.aval = key, None, NO_ATTRS, (), PRIMARY, 0, aval
        _intern(ident, v)
    return v


def Derived(  # noqa: N802 (a term constructor)
    op: str,
    attrs: Attrs,
    inputs: tuple[ValueKey, ...],
    role: Role,
    slot: int,
    aval: Aval,
) -> ValueKey:
    """The key of output ``slot`` of ``op(inputs)``. ``aval`` must be the inferred aval;
    it is stored, not hashed (the structure already determines it)."""
    # attrs and role by what their equality compares (tuples: hashed and compared in C)
    ident = ("D", op, attrs._items, inputs, role.active_mask, slot)
    ref = _INTERN.get(ident)
    if ref is not None:
        found = ref()
        if found is not None:
            return found
    v = object.__new__(ValueKey)
    v.input, v.op, v.attrs, v.inputs, v.role, v.slot, v.aval = None, op, attrs, inputs, role, slot, aval
    new = _Ref(v, _forget)
    new.ident = ident
    # setdefault is atomic: of two threads making the same term at once, one object wins
    ref = _INTERN.setdefault(ident, new)
    if ref is not new:  # another thread made it meanwhile, or a dead entry is still there
        with _INTERN_LOCK:
            ref = _INTERN.setdefault(ident, new)
            if ref is not new:
                found = ref()
                if found is not None:
                    return found
                _INTERN[ident] = new
    return v
