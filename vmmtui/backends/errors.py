"""CUresult names and texts, and the one checked driver call: shared by cuda.py and kernels.py.

Kept apart so that the backend and its kernels both depend on it, never on each other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from vmmtui.backends.base import CallLog
from vmmtui.backends.ipc_bytes import ipc_bytes, is_ipc_handle
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.values import Call

try:
    from cuda.bindings import driver as cu
except ImportError:  # pragma: no cover - cuda-python is a dependency
    cu = None


def error_name(err: Any) -> str:
    """``CUDA_ERROR_INVALID_VALUE`` for a CUresult (or its number when the enum does not know it)."""
    try:
        return cu.CUresult(err).name
    except Exception:
        return f"CUresult {int(err)}"


def error_text(err: Any) -> str:
    """The driver's own sentence for a CUresult (cuGetErrorString), else its name."""
    try:
        e, s = cu.cuGetErrorString(err)
        if e == cu.CUresult.CUDA_SUCCESS and s:
            return s.decode() if isinstance(s, bytes) else str(s)
    except Exception:
        pass
    return error_name(err)


def short(v: Any) -> str:
    """A driver return value as the call log shows it (IPC handles and pointers shortened)."""
    if is_ipc_handle(v):  # CUipcMemHandle: 64 opaque bytes
        return ipc_bytes(v)[:8].hex() + "… (64 bytes)"
    if isinstance(v, bytes):
        return v.split(b"\0", 1)[0].decode(errors="replace")
    if hasattr(v, "requestedHandleTypes"):  # CUmemAllocationProp: its str() is 12 lines and costly
        loc = v.location
        return (
            f"{v.type.name.removeprefix('CU_MEM_ALLOCATION_TYPE_')} on "
            f"{loc.type.name.removeprefix('CU_MEM_LOCATION_TYPE_').lower()} {int(loc.id)}"
        )
    try:
        return hex(int(v)) if not isinstance(v, (bool, str)) and int(v) > 4096 else str(int(v))
    except Exception:
        return str(v)


def checked_call(
    calls: CallLog,
    name: str,
    fn: Callable[..., Any],
    *args: Any,
    show: dict[str, Any] | None = None,
) -> Any:
    """Call a ``cuda.bindings`` function, record it, and raise StepError unless it returned CUDA_SUCCESS.

    Returns the values after the CUresult: None, one value, or a tuple of them."""
    t0 = time.perf_counter_ns()
    try:
        res = fn(*args)
    except Exception as exc:
        dt = time.perf_counter_ns() - t0
        calls.add(Call(name, show or {}, f"{type(exc).__name__}: {exc}", dt, ok=False))
        raise StepError(failure("PYTHON", name, f"{type(exc).__name__}: {exc}")) from exc
    dt = time.perf_counter_ns() - t0
    err, values = res[0], res[1:]
    if err != cu.CUresult.CUDA_SUCCESS:
        code = error_name(err)
        calls.add(Call(name, show or {}, code, dt, ok=False))
        raise StepError(failure(code, name, error_text(err)))
    shown = ", ".join(short(v) for v in values) if values else "CUDA_SUCCESS"
    calls.add(Call(name, show or {}, shown, dt))
    if not values:
        return None
    return values[0] if len(values) == 1 else values
