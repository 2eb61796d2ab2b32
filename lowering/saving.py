"""Program files: a compiled program saved as data, and read back.

``save_program(program, path)`` writes a zip archive (format ``tidu-program``, version
``FORMAT_VERSION``; docs/lowering.md#saving-programs documents it field by field):

- ``program.json``: the SSA program as JSON: instructions (op name, attributes, operand
  and result slots), every slot's aval, the inputs (slot, printed name, key), the
  outputs, the functions control-flow ops apply (``bodies``: graphs of the same kind),
  what the program needs of the catalog (``tidu.ops.needs``), and a table of constants;
- ``arrays/<i>.npy``: constants of more than ``INLINE_SIZE`` elements, in NumPy's
  ``.npy`` format (small ones are numbers in the JSON itself).

Nothing in a file is executed or unpickled when it is read: JSON is parsed, arrays are
read with ``allow_pickle=False``, and the program is checked (every op known to the
active catalog, slots written once before use, every instruction's aval what its type
rule gives) before it is returned. Caches are not saved: generated source and XLA
executables are made again on first use.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from importlib import metadata
from typing import IO, Any

import numpy as np
from tidu.lowering.ssa import Instruction, SSAProgram, instruction_ops

from tidu.core.body import Body
from tidu.core.graph import MaterializedGraph, MNode
from tidu.core.keys import DTYPES, NO_ATTRS, Attrs, Aval, Cotangent, InputKey, Literal, Named, Tangent
from tidu.ops.catalog import OpError
from tidu.ops.needs import CatalogMismatchError, catalog_for, catalog_needs

FORMAT = "tidu-program"
FORMAT_VERSION = 1
HEADER = "program.json"
INLINE_SIZE = 64  # constants up to this many elements are JSON numbers, bigger ones .npy members

PathLike = str | os.PathLike[str] | IO[bytes]


class ProgramFileError(ValueError):
    """A program file cannot be read: not a program file, corrupt, or of a newer format."""


# what reading a member of a damaged archive raises: a CRC, deflate or header error
# (zlib.error; NotImplementedError for a flag bit or compression method read from noise,
# RuntimeError for one that says the member is encrypted)
_READ_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error, NotImplementedError, RuntimeError)


def _check_path(path: Any, what: str) -> None:
    """A file name (str or os.PathLike) or a binary file object, else a TypeError that says so."""
    if not isinstance(path, str | os.PathLike) and not hasattr(path, "write" if what == "Program.save" else "read"):
        raise TypeError(f"{what} takes a file name (str or pathlib.Path) or a binary file object, got "
                        f"{type(path).__name__}")


# --- writing ------------------------------------------------------------------------------


class _Writer:
    """Encodes attributes, avals, keys and graphs as JSON data; gathers constants and bodies."""

    def __init__(self) -> None:
        self.arrays: list[dict[str, Any]] = []
        self.members: dict[str, np.ndarray] = {}
        self.array_index: dict[Literal, int] = {}
        self.bodies: list[dict[str, Any]] = []
        self.body_index: dict[Body, int] = {}

    def literal(self, lit: Literal) -> int:
        i = self.array_index.get(lit)
        if i is None:
            arr = lit.array
            entry: dict[str, Any] = {"dtype": arr.dtype.name, "shape": list(arr.shape)}
            if arr.size <= INLINE_SIZE and _finite(arr):
                entry["values"] = [_number(v) for v in arr.reshape(-1).tolist()]
            elif arr.size <= INLINE_SIZE:  # inf or nan: the bits, so payloads survive
                entry["base64"] = _b64(arr)
            else:
                entry["member"] = f"arrays/{len(self.arrays)}.npy"
                self.members[entry["member"]] = arr
            i = self.array_index[lit] = len(self.arrays)
            self.arrays.append(entry)
        return i

    def body(self, body: Body) -> int:
        i = self.body_index.get(body)
        if i is None:
            encoded = {"label": body.label, "name": body.name, **self.graph(body.graph)}  # nested bodies first
            i = self.body_index[body] = len(self.bodies)
            self.bodies.append(encoded)
        return i

    def graph(self, graph: MaterializedGraph) -> dict[str, Any]:
        nodes = []
        for n in graph.nodes:
            if n.op is None:
                nodes.append([None, _key(n.input), str(n.aval)])
            else:
                nodes.append([n.op, self.attrs(n.attrs, n.op), list(n.inputs), str(n.aval)])
        return {"nodes": nodes, "inputs": list(graph.inputs), "outputs": list(graph.outputs)}

    def attrs(self, attrs: Attrs, op: str) -> dict[str, Any]:
        return {k: self.value(v, f"attribute {k} of {op}") for k, v in attrs.items()}

    def value(self, v: Any, what: str) -> Any:
        if v is None or isinstance(v, bool | int | str):
            return v
        if isinstance(v, float):
            return _number(v)
        if isinstance(v, complex):
            return {"complex": [_number(v.real), _number(v.imag)]}
        if isinstance(v, tuple):
            return [self.value(x, what) for x in v]
        if isinstance(v, Literal):
            return {"array": self.literal(v)}
        if isinstance(v, Body):
            return {"body": self.body(v)}
        raise TypeError(f"cannot save {what}: a {type(v).__name__} is not a value the program format holds")


def _finite(arr: np.ndarray) -> bool:
    return arr.dtype.kind not in "fc" or bool(np.isfinite(arr).all())


def _number(v: Any) -> Any:
    """A JSON number for a finite float (Python's repr: the shortest text that reads back
    to the same bits), ``{"float_bits": hex}`` for inf and nan; complex as [re, im]."""
    if isinstance(v, complex):
        return [_number(v.real), _number(v.imag)]
    if isinstance(v, float) and not np.isfinite(v):
        return {"float_bits": struct.pack(">d", v).hex()}
    return v


def _b64(arr: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<")).tobytes()).decode()


def _key(k: InputKey | None) -> dict[str, Any]:
    if isinstance(k, Named):
        return {"named": k.name}
    if isinstance(k, Tangent):
        return {"tangent_of": _key(k.of), "pass": k.pass_id}
    if isinstance(k, Cotangent):
        return {"cotangent_of_pass": k.pass_id, "index": k.index}
    raise TypeError(f"cannot save the input key {k!r} ({type(k).__name__})")


def program_document(program: SSAProgram) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The JSON document of ``program`` and the arrays stored beside it, by member name."""
    w = _Writer()
    instructions = [[ins.op, w.attrs(ins.attrs, ins.op), list(ins.inputs), list(ins.outputs)]
                    for ins in program.instructions]
    doc = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "tidu_version": _tidu_version(),
        "needs": catalog_needs(program.catalog, instruction_ops(program.instructions)),
        "inputs": [{"slot": s, "name": str(k), "key": _key(k)}
                   for s, k in zip(program.input_slots, program.input_keys, strict=True)],
        "outputs": list(program.output_slots),
        "avals": [str(a) for a in program.slot_avals],
        "instructions": instructions,
        "bodies": w.bodies,
        "arrays": w.arrays,
    }
    return doc, w.members


def save_program(program: SSAProgram, path: PathLike) -> None:
    """Write ``program`` to ``path`` (a file name or a binary file object) as a program file.
    The same program gives the same bytes (members in a fixed order with a fixed date)."""
    _check_path(path, "Program.save")
    doc, members = program_document(program)
    text = json.dumps(doc, separators=(",", ":"), allow_nan=False)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        _write(zf, HEADER, text.encode("utf-8"))
        for name, arr in members.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
            _write(zf, name, buf.getvalue())


def _write(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    zf.writestr(info, data)


def _tidu_version() -> str:
    try:  # the installed distribution's version
        return metadata.version("tidu")
    except metadata.PackageNotFoundError:
        return "unknown"


# --- reading ------------------------------------------------------------------------------


_TOKEN = re.compile(r"[A-Za-z0-9_.+-]*")
# the integer attributes of control-flow ops: counts and positions the back ends write as numbers
_CONTROL_INTS = {"scan": ("index", "length", "n_carry", "n_consts", "reverse"), "cond": ("index",),
                 "while": ("index", "n_body_consts", "n_cond_consts")}
_AVAL = re.compile(r"([a-z]+\d*)\[(\d+(?:,\d+)*)?\]")
_DTYPE_OF_SHORT = {str(Aval((), d))[:-2]: d for d in DTYPES}  # f64 -> float64


class _Corrupt(Exception):
    """Raised inside the reader; becomes a ProgramFileError that names the file."""


class _Reader:
    def __init__(self, doc: dict[str, Any], members: Callable[[str], np.ndarray]) -> None:
        self.doc = doc
        self.member = members
        self.arrays: list[Literal | None] = [None] * len(_list(doc, "arrays"))
        self.bodies: list[Body] = []
        self.avals: dict[str, Aval] = {}

    def aval(self, text: Any) -> Aval:
        a = self.avals.get(text) if isinstance(text, str) else None
        if a is None:
            m = _AVAL.fullmatch(text) if isinstance(text, str) else None
            if m is None or m.group(1) not in _DTYPE_OF_SHORT:
                raise _Corrupt(f"{text!r} is not an aval (e.g. f64[3,4]; dtypes {', '.join(_DTYPE_OF_SHORT)})")
            shape = tuple(int(d) for d in m.group(2).split(",")) if m.group(2) else ()
            a = self.avals[text] = Aval(shape, _DTYPE_OF_SHORT[m.group(1)])
        return a

    def literal(self, i: Any) -> Literal:
        entries = self.doc["arrays"]
        if type(i) is not int or not 0 <= i < len(entries):
            raise _Corrupt(f"array {i!r} is not in the arrays table ({len(entries)} entries)")
        lit = self.arrays[i]
        if lit is None:
            lit = self.arrays[i] = Literal(self.array(entries[i], f"arrays[{i}]"))
        return lit

    def array(self, e: Any, where: str) -> np.ndarray:
        if not isinstance(e, dict) or e.get("dtype") not in DTYPES or not _ints(e.get("shape")):
            raise _Corrupt(f"{where}: an array needs a dtype ({', '.join(DTYPES)}) and a shape (a list of ints)")
        dtype, shape = np.dtype(e["dtype"]), tuple(e["shape"])
        if "values" in e:
            values = [_unnumber(v) for v in _list(e, "values")]
            arr = np.array(values, dtype=dtype) if values else np.empty(0, dtype)
        elif "base64" in e:
            try:
                raw = base64.b64decode(e["base64"], validate=True)
                arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype)
            except (ValueError, TypeError) as err:
                raise _Corrupt(f"{where}: bad base64 data ({err})") from None
        elif "member" in e:
            arr = self.member(e["member"])
            if arr.dtype != dtype:
                raise _Corrupt(f"{where}: {e['member']} holds {arr.dtype.name}, the table says {dtype.name}")
        else:
            raise _Corrupt(f"{where}: an array needs 'values', 'base64' or 'member'")
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise _Corrupt(f"{where}: {arr.size} elements for shape {list(shape)}")
        return arr.reshape(shape)

    def body(self, i: Any) -> Body:
        if type(i) is not int or not 0 <= i < len(self.bodies):
            raise _Corrupt(f"body {i!r} is not among the bodies read before it ({len(self.bodies)})")
        return self.bodies[i]

    def value(self, v: Any) -> Any:
        if isinstance(v, str) and not _TOKEN.fullmatch(v):
            # back ends write attributes into generated source (NumPy's exec'd Python, C): a
            # str attribute is a word (a dtype, a direction, a mode), never code
            raise _Corrupt(f"{json.dumps(v)[:80]} is not an attribute value (a str attribute is a word: letters, "
                           "digits, _ . + -)")
        if v is None or isinstance(v, bool | int | float | str):
            return v
        if isinstance(v, list):
            return tuple(self.value(x) for x in v)
        if isinstance(v, dict) and len(v) == 1:
            (tag, x), = v.items()
            if tag == "array":
                return self.literal(x)
            if tag == "body":
                return self.body(x)
            if tag == "complex" and isinstance(x, list) and len(x) == 2:
                return complex(_unnumber(x[0]), _unnumber(x[1]))
            if tag == "float_bits":
                return _unnumber(v)
        raise _Corrupt(f"{json.dumps(v)[:80]} is not an attribute value")

    def attrs(self, a: Any) -> Attrs:
        if not isinstance(a, dict):
            raise _Corrupt(f"attributes must be an object, got {json.dumps(a)[:80]}")
        return Attrs({k: self.value(v) for k, v in a.items()}) if a else NO_ATTRS

    def key(self, k: Any) -> InputKey:
        if isinstance(k, dict):
            if set(k) == {"named"} and isinstance(k["named"], str):
                return Named(k["named"])
            if set(k) == {"tangent_of", "pass"} and type(k["pass"]) is int:
                return Tangent(self.key(k["tangent_of"]), k["pass"])
            if set(k) == {"cotangent_of_pass", "index"} and _ints([k["cotangent_of_pass"], k["index"]]):
                return Cotangent(k["cotangent_of_pass"], k["index"])
        raise _Corrupt(f"{json.dumps(k)[:80]} is not an input key")

    def graph(self, g: Any) -> MaterializedGraph:
        nodes = []
        for j, n in enumerate(_list(g, "nodes")):
            if isinstance(n, list) and len(n) == 3 and n[0] is None:
                nodes.append(MNode(None, NO_ATTRS, (), self.aval(n[2]), self.key(n[1])))
            elif isinstance(n, list) and len(n) == 4 and isinstance(n[0], str) and _ints(n[2]):
                if any(not 0 <= i < j for i in n[2]):
                    raise _Corrupt(f"node {j} ({n[0]}) reads a node not before it: {n[2]}")
                nodes.append(MNode(n[0], self.attrs(n[1]), tuple(n[2]), self.aval(n[3])))
            else:
                raise _Corrupt(f"node {j} is neither [null, key, aval] nor [op, attrs, inputs, aval]")
        ins, outs = _list(g, "inputs"), _list(g, "outputs")
        if not _ints(ins) or not _ints(outs) or any(not 0 <= i < len(nodes) for i in [*ins, *outs]):
            raise _Corrupt("inputs and outputs must be node numbers")
        if any(nodes[i].op is not None for i in ins):
            raise _Corrupt("an input is not an input node")
        if sorted(ins) != [j for j, n in enumerate(nodes) if n.op is None]:  # (a body's inputs bind in order)
            raise _Corrupt(f"inputs {ins} are not the input nodes, each once")
        return MaterializedGraph(nodes, list(ins), list(outs))


def _list(d: Any, name: str) -> list[Any]:
    v = d.get(name) if isinstance(d, dict) else None
    if not isinstance(v, list):
        raise _Corrupt(f"'{name}' is missing or not a list")
    return v


def _ints(v: Any) -> bool:
    return isinstance(v, list) and all(type(x) is int for x in v)


def _unnumber(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"float_bits"}:
        try:
            return struct.unpack(">d", bytes.fromhex(v["float_bits"]))[0]
        except (ValueError, TypeError, struct.error):
            raise _Corrupt(f"{v['float_bits']!r} is not the hex of a float64") from None
    if isinstance(v, list) and len(v) == 2:  # a complex element
        return complex(_unnumber(v[0]), _unnumber(v[1]))
    if v is None or not isinstance(v, bool | int | float):
        raise _Corrupt(f"{json.dumps(v)[:80]} is not a number")
    return v


def read_program[P: SSAProgram](path: PathLike, cls: type[P] = SSAProgram) -> P:  # type: ignore[assignment]
    """The program saved at ``path`` (an instance of ``cls``), under the catalog it needs:
    the built-in one, or the active one where it applies primitives of a user's rule file
    (``tidu.ops.needs.catalog_for``). Raises ``ProgramFileError`` for a file that is not
    a program file, is corrupt or is of a newer format version, and
    ``CatalogMismatchError`` for ops the active catalog lacks."""
    _check_path(path, "tidu.load_program")
    where = os.fspath(path) if isinstance(path, str | os.PathLike) else getattr(path, "name", "<file>")
    hint = "save the program again with Program.save"
    try:
        zf = zipfile.ZipFile(path)
    except FileNotFoundError:
        raise
    except _READ_ERRORS as e:
        raise ProgramFileError(f"{where}: not a tidu program file (not a zip archive: {e}); "
                               f"program files are written by Program.save") from None
    with zf:
        try:
            raw = zf.read(HEADER)
        except KeyError:
            raise ProgramFileError(f"{where}: not a tidu program file (no {HEADER} in the archive); "
                                   "program files are written by Program.save") from None
        except _READ_ERRORS as e:
            raise ProgramFileError(f"{where}: corrupt program file ({HEADER}: {e}); {hint}") from None
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ProgramFileError(f"{where}: corrupt program file ({HEADER} is not JSON: {e}); {hint}") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ProgramFileError(f"{where}: not a tidu program file ({HEADER} does not say "
                                   f"format {FORMAT!r}); program files are written by Program.save")
        version = doc.get("version")
        if type(version) is not int or version < 1:
            raise ProgramFileError(f"{where}: corrupt program file (format version {version!r}); {hint}")
        if version > FORMAT_VERSION:
            raise ProgramFileError(
                f"{where}: saved in program format version {version} (by tidu {doc.get('tidu_version', '?')}); "
                f"this tidu reads versions up to {FORMAT_VERSION}: upgrade tidu, or save the program "
                "again with this version")

        def member(name: Any) -> np.ndarray:
            if not isinstance(name, str) or not name.startswith("arrays/"):
                raise _Corrupt(f"{name!r} is not an array member")
            try:
                with zf.open(name) as f:
                    return np.lib.format.read_array(f, allow_pickle=False)
            except KeyError:
                raise _Corrupt(f"the archive has no member {name}") from None
            except _READ_ERRORS as e:
                raise _Corrupt(f"{name}: {e}") from None

        try:
            return _decode(doc, member, cls, where)
        except CatalogMismatchError:
            raise
        except _Corrupt as e:
            raise ProgramFileError(f"{where}: corrupt program file: {e}; {hint}") from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:  # what the checks did not foresee
            raise ProgramFileError(f"{where}: corrupt program file ({type(e).__name__}: {e}); {hint}") from None


def _decode[P: SSAProgram](doc: dict[str, Any], member: Callable[[str], np.ndarray], cls: type[P], where: str) -> P:
    r = _Reader(doc, member)
    section = "bodies"
    try:
        for i, b in enumerate(_list(doc, "bodies")):
            section = f"bodies[{i}]"
            if not isinstance(b, dict) or not isinstance(b.get("label"), str) or not _TOKEN.fullmatch(b["label"]):
                raise _Corrupt("a body needs a label (a word: letters, digits, _ . + -)")
            body = Body(r.graph(b), b["label"])
            if body.name != b.get("name"):
                raise _Corrupt(f"the body's graph is not the one saved as {b.get('name')!r} (it reads as {body.name})")
            r.bodies.append(body)
        section = "avals"
        avals = [r.aval(a) for a in _list(doc, "avals")]
        section = "instructions"
        instructions = []
        for i, ins in enumerate(_list(doc, "instructions")):
            section = f"instructions[{i}]"
            if not (isinstance(ins, list) and len(ins) == 4 and isinstance(ins[0], str)
                    and _ints(ins[2]) and _ints(ins[3])):
                raise _Corrupt("an instruction is [op, attrs, operand slots, result slots]")
            instructions.append(Instruction(ins[0], r.attrs(ins[1]), tuple(ins[2]), tuple(ins[3])))
        section = "inputs"
        entries = _list(doc, "inputs")
        if not all(isinstance(e, dict) and type(e.get("slot")) is int for e in entries):
            raise _Corrupt("an input is {slot, name, key}")
        input_slots = [e["slot"] for e in entries]
        input_keys = [r.key(e.get("key")) for e in entries]
        section = "outputs"
        outputs = _list(doc, "outputs")
        if not _ints(outputs):
            raise _Corrupt("outputs are slot numbers")
        needs = doc.get("needs")
        if not isinstance(needs, list) or not all(
                isinstance(n, dict) and isinstance(n.get("file"), str) and isinstance(n.get("sha256"), str)
                and isinstance(n.get("primitives"), list) for n in needs):
            section = "needs"
            raise _Corrupt("needs is a list of {file, sha256, primitives}")
    except _Corrupt as e:
        raise _Corrupt(f"at {section}: {e}") from None
    cat = catalog_for(needs, instruction_ops(instructions), where)
    program = cls(instructions, input_slots, list(outputs), avals, input_keys, catalog=cat)
    _check(program, r.bodies)
    return program


def _check(program: SSAProgram, bodies: list[Body]) -> None:
    """Slots written once before they are read, and every op's aval what its type rule
    gives (a hand-edited or damaged file fails here, not in the middle of a run)."""
    avals, n = program.slot_avals, len(program.slot_avals)
    written = [False] * n
    for s in program.input_slots:
        if not 0 <= s < n or written[s]:
            raise _Corrupt(f"at inputs: slot {s} is out of range or listed twice")
        written[s] = True
    cat = program.catalog
    assert cat is not None
    for i, ins in enumerate(program.instructions):
        where = f"at instructions[{i}] ({ins.op})"
        if any(not 0 <= s < n or not written[s] for s in ins.inputs):
            raise _Corrupt(f"{where}: reads a slot not written before it: {list(ins.inputs)}")
        if len(ins.outputs) != 1 or not 0 <= ins.outputs[0] < n or written[ins.outputs[0]]:
            raise _Corrupt(f"{where}: writes {list(ins.outputs)}: one slot, not written before")
        written[ins.outputs[0]] = True
        _infer(cat, ins.op, [avals[s] for s in ins.inputs], ins.attrs, [avals[ins.outputs[0]]], where)
    if any(not 0 <= s < n or not written[s] for s in program.output_slots):
        raise _Corrupt(f"at outputs: {program.output_slots} names a slot no instruction writes")
    for b in bodies:
        g = b.graph
        for j, node in enumerate(g.nodes):
            if node.op is not None:
                _infer(cat, node.op, [g.nodes[k].aval for k in node.inputs], node.attrs, [node.aval],
                       f"at body {b.name}, node {j} ({node.op})")


def _infer(cat: Any, op: str, ins: list[Aval], attrs: Attrs, want: list[Aval], where: str) -> None:
    for name in _CONTROL_INTS.get(op, ()):
        v = attrs.get(name)
        if type(v) is not int or v < 0:
            raise _Corrupt(f"{where}: attribute {name} must be an int >= 0, got {v!r}")
    try:
        got = cat.get_primitive(op).infer(ins, attrs)
    except (OpError, KeyError, TypeError, ValueError, IndexError) as e:
        raise _Corrupt(f"{where}: {e}") from None
    if list(got) != want:
        raise _Corrupt(f"{where}: the type rule gives {', '.join(map(str, got))}, the file says "
                       f"{', '.join(map(str, want))}")


__all__ = ["FORMAT", "FORMAT_VERSION", "ProgramFileError", "program_document", "read_program", "save_program"]
