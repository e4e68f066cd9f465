"""The fill/verify kernels (shipped PTX, JIT-compiled by the driver) find every corruption at the right index (GPU only)."""

import random

import numpy as np
import pytest

from vmmtui.backends.pattern import pattern
from vmmtui.words.troubleshooting import worded

pytestmark = pytest.mark.gpu

SIZE = 8 << 20  # 2 Mi integers: many blocks, several grid-stride rounds


@pytest.fixture(scope="module")
def mapped(tmp_path_factory):
    """One VMM allocation in this process, mapped and filled by the kernel; yields (backend, va, count)."""
    import os

    from vmmtui.backends.cuda import CudaBackend
    from vmmtui.backends.kernel_image import NVRTC_ENV

    os.environ[NVRTC_ENV] = "0"  # the driver-only path: the shipped PTX, no NVRTC

    b = CudaBackend()
    b.init(0)
    b.query()
    h = b.create(SIZE)
    va = b.reserve(SIZE, b.info.granularity_min)
    b.map(va, SIZE, h)
    b.set_access(va, SIZE)
    try:
        how = b.load_kernels()
    finally:
        del os.environ[NVRTC_ENV]
    assert how == "PTX 9.0 sm_75, JIT-compiled by the driver"
    assert b.fill(va, SIZE, "device") == SIZE // 4
    yield b, va, SIZE // 4
    b.unmap(va, SIZE)
    b.free_range(va, SIZE)
    b.release(h)
    b.shutdown()


def poke(b, va: int, index: int, value: int) -> None:
    from cuda.bindings import driver as cu

    v = np.array([value], dtype=np.uint32)
    (err,) = cu.cuMemcpyHtoD(cu.CUdeviceptr(va + index * 4), v.ctypes.data, 4)
    assert err == cu.CUresult.CUDA_SUCCESS


def test_fill_kernel_writes_the_seed_pattern(mapped):
    b, va, count = mapped
    host = b.verify_host(va, count * 4)
    assert host.passed and host.checked == count
    assert b.verify(va, count * 4, "device").passed


def _corruption_indices(count: int) -> list[int]:
    rng = random.Random(20261122)
    fixed = [
        0,
        1,
        3,
        4,
        255,
        256,
        257,
        1023,
        1024,
        4095,
        4097,
        count // 2 + 3,
        count - 5,
        count - 4,
        count - 2,
        count - 1,
    ]
    return fixed + rng.sample(range(count), 16)


@pytest.mark.parametrize("on", ["device", "both"])
def test_one_flipped_integer_is_found_at_its_index(mapped, on):
    b, va, count = mapped
    rng = random.Random(7)
    for index in _corruption_indices(count):
        expected = int(pattern(index, 1)[0])
        bad = expected ^ (1 << rng.randrange(32))
        poke(b, va, index, bad)
        try:
            v = b.verify(va, count * 4, on)
        finally:
            poke(b, va, index, expected)
        assert (v.mismatches, v.first_index, v.first_expected, v.first_got) == (
            1,
            index,
            expected,
            bad,
        ), index
    assert b.verify(va, count * 4, "device").passed


def test_many_corruptions_count_all_and_report_the_lowest(mapped):
    b, va, count = mapped
    indices = sorted(random.Random(3).sample(range(count), 1000))
    for i in indices:
        poke(b, va, i, int(pattern(i, 1)[0]) + 1)
    try:
        v = b.kernels.verify(va, count)
        assert v.mismatches == 1000 and v.first_index == indices[0]
    finally:
        b.fill(va, count * 4, "device")
    assert b.kernels.verify(va, count).passed


@pytest.mark.parametrize("n", [1, 3, 5, 1021, 256 * 4 + 7, 1_000_003])
def test_counts_that_are_not_multiples_of_four_or_the_block(mapped, n):
    """The scalar tail: the last integers of an odd-sized range are written and checked too."""
    b, va, count = mapped
    poke(b, va, n - 1, 0)
    assert b.kernels.verify(va, n).first_index == n - 1
    b.kernels.fill(va, n)
    assert b.kernels.verify(va, n).passed
    poke(b, va, n, 0)  # just past the range: outside what was asked, so not seen
    try:
        assert b.kernels.verify(va, n).passed
        assert b.kernels.verify(va, n + 1).first_index == n
    finally:
        b.fill(va, count * 4, "device")


def test_a_ptx_the_driver_cannot_jit_without_nvrtc_fails_with_cause_and_fix(
    mapped, tmp_path, monkeypatch
):
    """What a driver older than the shipped PTX says: the same code path, with a PTX ISA no driver knows."""
    from vmmtui.backends.kernel_image import NVRTC_ENV, PTX_ENV, PTX_FILE, load_module
    from vmmtui.stream.failures import StepError

    b = mapped[0]
    future = tmp_path / "future.ptx"
    future.write_text(PTX_FILE.read_text().replace(".version 9.0", ".version 99.0"))
    monkeypatch.setenv(PTX_ENV, str(future))
    monkeypatch.setenv(NVRTC_ENV, "0")
    with pytest.raises(StepError) as exc:
        load_module(b, b.kernels.arch)
    f = exc.value.failure
    assert f.call == "cuModuleLoadData (PTX)" and f.code.startswith("CUDA_ERROR_"), f.one_line()
    assert (
        "R580" in worded(f)[0]
        and "--verify host" in worded(f)[1]
        and "NVRTC, the second way" in f.message
    )
    print(f.one_line())
