"""A legacy IPC handle's 64 bytes survive the trip through the bindings' struct, whichever way the
installed cuda-bindings exposes them (``reserved`` up to 13.3, ``getPtr()`` from 13.4)."""

import pytest

driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-python is not installed")

from vmmtui.backends.errors import short  # noqa: E402
from vmmtui.backends.ipc_bytes import ipc_bytes, ipc_handle  # noqa: E402


def test_the_handle_bytes_round_trip_through_the_struct():
    data = bytes(range(64))
    h = ipc_handle(driver.CUipcMemHandle, data)
    assert ipc_bytes(h) == data
    assert short(h) == "0001020304050607… (64 bytes)"


def test_a_handle_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="64 bytes, not 63"):
        ipc_handle(driver.CUipcMemHandle, bytes(63))
