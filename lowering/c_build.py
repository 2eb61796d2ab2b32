"""Building and calling the C back end: ``Program.run(inputs, backend="c")``.

``c_call(program)`` writes the program's C source (``tidu.lowering.c_source``), compiles
it into a shared object with the system C compiler, loads it with cffi (ABI mode:
``ffi.dlopen``; no Python headers needed) and returns the function ``Program.run``
calls. The shared object is cached on disk under a hash of the source, the compiler and
its flags: ``$TIDU_CACHE_DIR/c/<hash>.so`` (default ``~/.cache/tidu/c/``), next to the
source it was built from, so the same program in a new process loads without compiling.

The compiler is ``$CC`` or ``cc``, run as ``cc CFLAGS -shared -fPIC -o lib.so file.c -lm``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tidu.lowering.c_source import ENTRY, has_zeroed_entry, signature, to_c
from tidu.lowering.ssa import SSAProgram

# -O2: optimized; -ffp-contract=off: no fused multiply-add (NumPy rounds every product);
# -fno-math-errno: libm calls may be inlined or vectorized (errno is never read);
# -fwrapv: signed integers wrap around, as NumPy's do
CFLAGS = ("-std=c99", "-O2", "-ffp-contract=off", "-fno-math-errno", "-fwrapv")
INSTALL_HINT = ("the C back end needs cffi and a C compiler: pip install 'tidu[c]' (or pip install cffi), "
                "and gcc or clang on the PATH (e.g. apt-get install gcc), or $CC naming one")


class CBuildError(RuntimeError):
    """The C compiler or cffi is missing, or the compiler rejected the source."""


def cache_dir() -> Path:
    """Where compiled programs are kept: ``$TIDU_CACHE_DIR/c`` or ``~/.cache/tidu/c``."""
    root = os.environ.get("TIDU_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "tidu") / "c"


def compiler() -> str:
    """The C compiler's path ($CC or cc), or CBuildError saying how to get one."""
    name = os.environ.get("CC") or "cc"
    path = shutil.which(name)
    if path is None:
        raise CBuildError(f"no C compiler found ({name!r} is not on the PATH); {INSTALL_HINT}")
    return path


def compiler_or_none() -> str | None:
    """The C compiler's path, or None where there is none."""
    try:
        return compiler()
    except CBuildError:
        return None


def _ffi() -> Any:
    try:
        import cffi
    except ImportError:
        raise CBuildError(f"cffi is not installed; {INSTALL_HINT}") from None
    return cffi.FFI()


def _compile(cc: str, source: Path, target: Path) -> None:
    """Run the compiler (tests count these calls)."""
    cmd = [cc, *CFLAGS, "-shared", "-fPIC", "-o", str(target), str(source), "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        raise CBuildError(f"the C compiler failed on {source} (exit {done.returncode}): "
                          + ("; ".join(lines[:3]) if lines else "no message"))


_LOCK = threading.Lock()  # one compile of a given source at a time in this process


def shared_object(source: str) -> Path:
    """The compiled shared object of ``source``: from the disk cache, else compiled now."""
    cc = compiler()
    key = hashlib.sha256("\0".join([source, cc, *CFLAGS]).encode()).hexdigest()[:32]
    folder = cache_dir()
    target = folder / f"{key}.so"
    if target.exists():
        return target
    with _LOCK:
        if target.exists():
            return target
        folder.mkdir(parents=True, exist_ok=True)
        c_file = folder / f"{key}.c"
        c_file.write_text(source)
        # compiled under a temporary name, then renamed: another process never loads half a file
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
        os.close(fd)
        try:
            _compile(cc, c_file, Path(tmp))
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return target


def c_call(program: SSAProgram) -> Callable[[Any], list[np.ndarray]]:
    """``Program.run(inputs, backend="c")`` for ``program``, built once per program.

    Inputs given as a list or tuple of C-contiguous NumPy arrays of exactly the input
    shapes and dtypes are passed as they are; anything else goes through
    ``Program.bind_inputs``. Outputs are fresh NumPy arrays."""
    source = program._cache.get("c_source")
    if source is None:
        source = program._cache["c_source"] = to_c(program)
    ffi = _ffi()
    zeroed = has_zeroed_entry(source)
    ffi.cdef(signature(program, zeroed))
    lib = ffi.dlopen(str(shared_object(source)))
    # outputs the program proves mostly +0.0 are made by np.zeros, and those elements are
    # not written again
    entry = getattr(lib, f"{ENTRY}_zeroed" if zeroed else ENTRY)
    work_bytes = int(getattr(lib, f"{ENTRY}_work_bytes")())
    outs = [(program.slot_avals[s].shape, np.dtype(program.slot_avals[s].dtype)) for s in program.output_slots]
    from_buffer, empty, null = ffi.from_buffer, np.zeros if zeroed else np.empty, ffi.NULL
    local = threading.local()  # scratch memory per thread: calls from several threads do not share it

    def scratch() -> Any:
        buf = getattr(local, "work", None)
        if buf is None:
            local.owner = from_buffer(np.empty(work_bytes + 64, np.uint8))  # keeps the array alive
            offset = (-int(ffi.cast("uintptr_t", local.owner))) % 64  # aligned to a cache line
            buf = local.work = local.owner + offset
        return buf

    def run(arrays: list[np.ndarray] | tuple[np.ndarray, ...]) -> list[np.ndarray]:
        results = [empty(shape, dtype) for shape, dtype in outs]
        try:
            ptrs = [from_buffer(a) for a in arrays]
        except (TypeError, ValueError, BufferError):  # not contiguous: a contiguous copy
            ptrs = [from_buffer(np.ascontiguousarray(a)) for a in arrays]
        status = entry(*ptrs, *[from_buffer(r) for r in results], scratch() if work_bytes else null)
        if status:
            raise MemoryError("the C program could not allocate its scratch memory")
        return results

    def call(inputs: Any) -> list[np.ndarray]:
        return run(program.ready_inputs(inputs))

    call.lib = lib  # type: ignore[attr-defined]  # kept alive with the function
    call.ffi = ffi  # type: ignore[attr-defined]
    return call


__all__ = ["CBuildError", "CFLAGS", "INSTALL_HINT", "c_call", "cache_dir", "compiler", "compiler_or_none",
           "shared_object"]
