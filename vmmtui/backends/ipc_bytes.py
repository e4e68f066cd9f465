"""The 64 opaque bytes of a legacy IPC handle (``CUipcMemHandle``), across cuda-bindings versions.

Up to 13.3 the bindings exposed them as ``reserved``; 13.4 exposes only ``getPtr()``, the address
of the C struct (a fresh install on a GPU box gets 13.4: reading ``reserved`` there was an
AttributeError in every legacy-IPC export). Both are read and written here, nowhere else.
"""

from __future__ import annotations

import ctypes
from typing import Any

#: sizeof(CUipcMemHandle): CU_IPC_HANDLE_SIZE
IPC_HANDLE_SIZE = 64


def is_ipc_handle(h: Any) -> bool:
    return type(h).__name__ == "CUipcMemHandle"


def ipc_bytes(h: Any) -> bytes:
    """The handle's bytes, as they go over the wire."""
    if hasattr(h, "reserved"):
        return bytes(h.reserved)
    return ctypes.string_at(h.getPtr(), IPC_HANDLE_SIZE)


def ipc_handle(handle_type: Any, data: bytes) -> Any:
    """A ``CUipcMemHandle`` (``handle_type``) holding ``data`` (exactly 64 bytes)."""
    if len(data) != IPC_HANDLE_SIZE:
        raise ValueError(f"an IPC handle is {IPC_HANDLE_SIZE} bytes, not {len(data)}")
    h = handle_type()
    if hasattr(h, "reserved"):
        h.reserved = data
    else:
        ctypes.memmove(h.getPtr(), data, IPC_HANDLE_SIZE)
    return h
