import os

import numpy as np

from vmmtui.backends.memfd import MemfdBackend
from vmmtui.backends.pattern import pattern


def test_two_mappings_of_one_memfd_share_pages():
    a, b = MemfdBackend(), MemfdBackend()
    info = a.init(0)
    b.init(0)
    size = 4 * info.granularity_min
    h = a.create(size)
    va = a.reserve(size, info.granularity_min)
    a.map(va, size, h)
    a.set_access(va, size)
    assert a.fill(va, size) == size // 4
    fd = a.export_fd(h)
    h2 = b.import_fd(fd)
    vb = b.reserve(size, info.granularity_min)
    b.map(vb, size, h2)
    b.set_access(vb, size)
    try:
        assert vb != va
        assert b.verify(vb, size).passed
        # a write through one mapping is seen through the other: same physical pages
        view = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint32 * (size // 4)).from_address(va))
        view[size // 4 - 1] ^= 0xFFFF
        result = b.verify(vb, size)
        assert not result.passed and result.first_index == size // 4 - 1
        assert result.first_expected == int(pattern(size // 4 - 1, 1)[0])
    finally:
        for be, v, hh in ((b, vb, h2), (a, va, h)):
            be.unmap(v, size)
            be.free_range(v, size)
            be.release(hh)
        os.close(fd)
    names = [c.name for c in a.calls.take()]
    assert names[:3] == ["sysconf", "memfd_create", "ftruncate"]
    assert "mprotect" in names and "munmap" in names


def test_memfd_has_no_legacy_ipc_and_says_so():
    import pytest

    from vmmtui.stream.failures import StepError

    b = MemfdBackend()
    for call in (
        b.unified_addressing,
        lambda: b.alloc(4096),
        lambda: b.ipc_open(bytes(64)),
        lambda: b.ipc_export(0),
        lambda: b.ipc_open_in_second_context(bytes(64)),
    ):
        with pytest.raises(StepError) as err:
            call()
        assert "memfd has no legacy IPC" in err.value.failure.message
    assert not b.has_device and b.title.startswith("memfd") and b.last_kernel_ms() is None
