"""Run programs with XLA by compiling their StableHLO text through JAX: on the CPU by
default, on any device JAX has with ``device=`` ("gpu", "gpu:1", a ``jax.Device``).

``run_xla(program, arrays)`` lowers the program with ``to_stablehlo``, compiles it once
(the call is built by ``checked_call`` and cached on ``program._cache``; ``Program.run``
uses the same one) and returns NumPy arrays.
``verify_stablehlo(text)`` only parses and verifies the text and reports the first
real error at ``line:col``.

jax and jaxlib are optional: ``pip install 'tidu[xla]'``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tidu.lowering.ssa import SSAProgram
from tidu.lowering.stablehlo import to_stablehlo

INSTALL_HINT = "pip install 'tidu[xla]'"


class XlaUnavailableError(ImportError):
    """jax/jaxlib are not installed; the message says how to install them."""


class StableHLOError(ValueError):
    """XLA's StableHLO parser or verifier rejected a module."""

    def __init__(self, message: str, text: str, line: int | None = None, col: int | None = None):
        self.text, self.line, self.col = text, line, col
        where = f"line {line}:{col}: " if line is not None else ""
        shown = ""
        if line is not None and 1 <= line <= len(text.splitlines()):
            shown = f"\n  {line:4d} | {text.splitlines()[line - 1].strip()}"
        super().__init__(f"StableHLO rejected: {where}{message}{shown}")


def jax_module(device: Any = None) -> Any:
    """Import jax for this back end. When tidu is the first to import it and no device
    other than the CPU is asked for, JAX starts on the CPU only (``JAX_PLATFORMS=cpu``,
    unless set): a GPU client would reserve most of the GPU's memory for a program that
    runs on the CPU. JAX's configuration is otherwise left as it is: tidu's own programs
    run with 64-bit types inside ``x64()`` only, so a user's float32 JAX code keeps its
    dtypes."""
    if "jax" not in sys.modules and _platform_of(device) in (None, "cpu"):
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        from jax.extend import backend  # noqa: F401 (checks the API we use exists)
    except ImportError as e:
        raise XlaUnavailableError(
            f"the XLA back end needs jax and jaxlib ({e}); install them with: {INSTALL_HINT}"
        ) from e
    return jax


_PLATFORM_NAMES = {"gpu": "gpu", "cuda": "gpu", "rocm": "gpu", "cpu": "cpu", "tpu": "tpu"}


def _platform_of(device: Any) -> str | None:
    """"cpu", "gpu", "tpu" for a device given by name ("gpu", "cuda:1", "cpu"), None otherwise."""
    if isinstance(device, str):
        return _PLATFORM_NAMES.get(device.partition(":")[0].strip().lower())
    platform = getattr(device, "platform", None)
    return None if platform is None else _PLATFORM_NAMES.get(platform, platform)


def resolve_device(device: Any) -> Any:
    """The JAX device ``device`` names: None (the CPU), a ``jax.Device``, or a name
    "cpu", "gpu" (also "cuda", "rocm"), "tpu", optionally with an index ("gpu:1")."""
    jax = jax_module(device)
    if device is None:
        device = "cpu"
    if not isinstance(device, str):
        if isinstance(device, jax.Device):
            return device
        raise TypeError(f"device must be a jax.Device or a name such as 'cpu' or 'gpu:0', got {type(device).__name__}")
    name, _, index_text = device.partition(":")
    platform = _PLATFORM_NAMES.get(name.strip().lower())
    if platform is None or (index_text and not index_text.strip().isdigit()):
        raise ValueError(f"unknown device {device!r}; use 'cpu', 'gpu', 'tpu' (optionally ':index') or a jax.Device")
    try:
        found = jax.devices(platform)
    except RuntimeError:
        found = []
    if not found:
        started = os.environ.get("JAX_PLATFORMS", "")
        why = (f" (JAX was started with JAX_PLATFORMS={started!r}: ask for the device on tidu's first XLA "
               "call, or import jax before tidu)" if started and platform not in started else "")
        have = ", ".join(sorted({d.platform for d in jax.devices()}))
        raise ValueError(f"no {platform} device for device={device!r}: JAX has {have}{why}")
    index = int(index_text) if index_text else 0
    if index >= len(found):
        raise ValueError(f"device={device!r}: JAX has {len(found)} {platform} device(s), numbered from 0")
    return found[index]


def x64() -> Any:
    """A context in which JAX has 64-bit types (this thread only), for running tidu's
    programs, whose values are float64 unless asked otherwise."""
    jax = jax_module()
    if jax.config.jax_enable_x64:
        return contextlib.nullcontext()
    return jax.enable_x64(True)


def _first_error(message: str) -> tuple[str, int | None, int | None]:
    """The first real error line of an MLIR/XLA message and its line:col, if any.

    XLA appends a misleading "forward incompatibility" line to every parse error."""
    for raw in message.splitlines():
        line = raw.strip()
        if not line or "forward incompatibility" in line:
            continue
        for prefix in ("UNKNOWN:", "INVALID_ARGUMENT:", "Unable to parse module assembly:"):
            line = line.removeprefix(prefix).strip()
        if not line:
            continue
        loc = _location(line)
        return re.sub(r'^(error: )?"?-"?:\d+:\d+: (error: )?', "", line), *loc
    return message.strip(), None, None


def _location(line: str) -> tuple[int | None, int | None]:
    """line:col from '-:4:11: error: ...', 'error: "-":4:11: ...' or 'loc("-":4:11)'."""
    m = re.search(r'"?-"?:(\d+):(\d+)', line)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def verify_stablehlo(text: str) -> None:
    """Parse and verify ``text`` without compiling; raises ``StableHLOError``."""
    jax_module()
    from jax.extend.mlir import ir
    from jax.interpreters import mlir

    with x64(), mlir.make_ir_context():
        try:
            module = ir.Module.parse(text)
            module.operation.verify()
        except ir.MLIRError as e:
            diags = getattr(e, "error_diagnostics", None) or []
            if diags:
                d = diags[0]
                line, col = _location(str(d.location))
                raise StableHLOError(d.message, text, line, col) from None
            msg, line, col = _first_error(str(e))
            raise StableHLOError(msg, text, line, col) from None


def compile_text(text: str) -> tuple[Any, Any]:
    """Loaded executable for ``text`` and its device; parse errors as ``StableHLOError``."""
    jax = jax_module()
    from jax.extend import backend

    client = backend.get_backend("cpu")
    device = client.local_devices()[0]
    # jax's compile options: without them XLA CPU's maximum/minimum drop NaNs
    # (maximum(1, nan) == 1), unlike NumPy and JAX.
    options = backend.get_compile_options(num_replicas=1, num_partitions=1)
    try:
        with x64():
            return client.compile_and_load(text, [device], options), device
    except jax.errors.JaxRuntimeError as e:
        verify_stablehlo(text)  # a clearer message (with line:col) when the text is at fault
        msg, line, col = _first_error(str(e))
        raise StableHLOError(msg, text, line, col) from None


def compiled(program: SSAProgram) -> tuple[Any, Any]:
    """(executable, device) for ``program``, compiled once and cached on the program."""
    entry = program._cache.get("xla")
    if entry is None:
        entry = program._cache["xla"] = compile_text(to_stablehlo(program))
    return entry


def _putter(program: SSAProgram, device: Any) -> Callable[[list[np.ndarray]], list[Any]]:
    """Moves input arrays to the device (the fallback path: ``jax.device_put``)."""
    jax = jax_module()

    def put(arrays: list[np.ndarray]) -> list[Any]:
        with x64():
            return [jax.device_put(a, device) for a in arrays]

    return put


def exported(program: SSAProgram, platform: str | None = None) -> Any:
    """``program``'s StableHLO as a ``jax.export.Exported`` (public API: the module is
    serialized with ``jax.interpreters.mlir`` and put in an Exported made by
    ``jax.export`` for the program's signature). ``exported(p).call`` is a JAX function:
    it can be jitted, vmapped and sharded like any other (``tidu.to_jax``).

    ``platform`` ("cpu", "cuda", "rocm", "tpu") is where it will run (JAX's default
    platform when None): what linear algebra becomes depends on it."""
    key = ("exported", platform)
    cached = program._cache.get(key)
    if cached is not None:
        return cached
    with x64():  # a float64 program's avals are float64 only with 64-bit types on
        out = program._cache[key] = _export(program, platform)
    return out


def _export(program: SSAProgram, platform: str | None) -> Any:
    jax = jax_module()
    from jax import export, tree_util
    from jax.extend.mlir import ir
    from jax.interpreters import mlir as jax_mlir

    if platform is None:
        platform = export_platform(jax.devices()[0])
    with jax_mlir.make_ir_context():
        data = jax_mlir.module_to_bytecode(ir.Module.parse(to_stablehlo(program, platform)))

    def avals(slots: list[int]) -> tuple[Any, ...]:
        return tuple(jax.core.ShapedArray(program.slot_avals[s].shape, np.dtype(program.slot_avals[s].dtype))
                     for s in slots)

    n_in, n_out = len(program.input_slots), len(program.output_slots)
    template = export.export(jax.jit(lambda x: x))(jax.ShapeDtypeStruct((), np.float32))
    fields = {f.name for f in dataclasses.fields(template)}
    changes = dict(
        fun_name="tidu", mlir_module_serialized=data,
        in_tree=tree_util.tree_structure(((0,) * n_in, {})), in_avals=avals(program.input_slots),
        out_tree=tree_util.tree_structure((0,) * n_out), out_avals=avals(program.output_slots),
        in_shardings_hlo=(None,) * n_in, out_shardings_hlo=(None,) * n_out,
        module_kept_var_idx=tuple(range(n_in)))
    changes["platforms"] = (platform,)
    # fields of the dataclass that versions of jax add (named shardings): unspecified
    changes |= {k: (None,) * (n_in if "_in_" in k else n_out)
                for k in ("_in_named_shardings", "_out_named_shardings") if k in fields}
    if "_get_vjp" in fields:  # the template's VJP is the identity's: none, so jax.grad refuses
        changes["_get_vjp"] = None
    return dataclasses.replace(template, **changes)


def export_platform(device: Any) -> str:
    """The platform name ``jax.export`` uses for ``device``: "cpu", "cuda", "rocm", "tpu"."""
    if device.platform != "gpu":
        return str(device.platform)
    version = str(getattr(device.client, "platform_version", "")).lower()
    return "rocm" if "rocm" in version or "hip" in version else "cuda"


def _jitted(program: SSAProgram, device: Any) -> Callable[..., Any] | None:
    """``program``'s module as a ``jax.export.Exported`` called through ``jax.jit`` on
    ``device`` (its first call is the one XLA compilation of the program), or None if
    this jax lacks the pieces. The same StableHLO runs on the same XLA; calls go through
    JAX's C++ dispatch, ~30 us faster than the client's Python entry points
    (bench/eval.py). Inputs are put on ``device`` unless it is JAX's default one."""
    jax = jax_module()
    key = ("xla_jit", device)
    fn = program._cache.get(key)
    if fn is None:
        try:
            with x64():
                fn = jax.jit(exported(program, export_platform(device)).call)
        except (ImportError, AttributeError, TypeError, ValueError):
            return None
        program._cache[key] = fn
    if device == jax.devices()[0]:
        def call(*args: Any) -> Any:
            with x64():
                return fn(*args)
    else:
        put = jax.device_put

        def call(*args: Any) -> Any:
            with x64():
                return fn(*put(args, device))

    return call


def _runner(program: SSAProgram, device: Any) -> Callable[..., Any]:
    """The per-program call on input arrays as positional arguments, compiled once: the
    jax.jit path, or the direct client path where that is unavailable (CPU only). A
    module that MLIR or XLA refuses is reported by the client path (``StableHLOError``
    with line:col)."""
    jax = jax_module()
    if "xla" not in program._cache:
        try:
            fast = _jitted(program, device)
        except Exception:
            compiled(program)  # raises the StableHLOError that says where the text is wrong
            raise
        if fast is not None:
            return _checked_first(program, fast, jax.errors.JaxRuntimeError)
    if device.platform != "cpu":
        raise XlaUnavailableError(f"running on {device} needs jax.export (jax>=0.4.30): {INSTALL_HINT}")
    exe, cpu = compiled(program)
    put = _putter(program, cpu)
    return lambda *args: exe.execute(put(list(args)))


def _checked_first(program: SSAProgram, fast: Callable[..., Any], refused: type[Exception]) -> Callable[..., Any]:
    """``fast``, whose first call (where XLA compiles) reports a refused module as the
    client path does; later calls go straight to ``fast``."""
    current: list[Callable[..., Any]] = []

    def first(*args: Any) -> Any:
        try:
            out = fast(*args)
        except refused:
            compiled(program)
            raise
        current[0] = fast
        return out

    current.append(first)
    return lambda *args: current[0](*args)


def checked_call(program: SSAProgram, device: Any = None) -> Callable[[Any], list[np.ndarray]]:
    """``Program.run(inputs, backend="xla", device=device)`` for ``program``, built once
    per program and device (``resolve_device``: the CPU by default).

    Inputs that are already NumPy arrays of exactly the input shapes and dtypes, given
    as a list or tuple, go straight to XLA; anything else goes through
    ``Program.bind_inputs``, which converts them or explains what is wrong.
    Outputs are NumPy arrays: on the CPU they view XLA's buffers without a copy, so they
    are read-only (as ``np.asarray`` of a JAX array is); copy one to modify it."""
    run = _runner(program, resolve_device(device))
    asarray, ready = np.asarray, program.ready_inputs

    def call(inputs: Any) -> list[np.ndarray]:
        return [asarray(out) for out in run(*ready(inputs))]

    return call


def run_xla(program: SSAProgram, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``program`` on XLA (CPU) with inputs in input-slot order (converted to the
    input dtypes); the results are read-only NumPy arrays (see ``checked_call``)."""
    args = [np.asarray(a, dtype=program.slot_avals[s].dtype, order="C")
            for s, a in zip(program.input_slots, arrays, strict=True)]
    call = program._cache.get("xla_call")
    if call is None:
        call = program._cache["xla_call"] = checked_call(program)
    return call(args)


__all__ = ["INSTALL_HINT", "StableHLOError", "XlaUnavailableError", "checked_call", "compile_text",
           "compiled", "export_platform", "exported", "jax_module", "resolve_device", "run_xla",
           "verify_stablehlo"]
