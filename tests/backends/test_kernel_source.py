"""NVRTC compiles the kernels without a GPU; skipped where libnvrtc is not installed."""

import pytest

from vmmtui.backends.kernels import compile_cubin, nvrtc_version


def _nvrtc_missing() -> str | None:
    try:
        nvrtc_version()
    except Exception as exc:  # cuda.pathfinder raises its own type when libnvrtc is absent
        return f"{type(exc).__name__}: {str(exc)[:80]}"
    return None


@pytest.mark.skipif(_nvrtc_missing() is not None, reason="libnvrtc not installed")
def test_compile_gives_a_cubin_and_leaves_the_bytes_singletons_alone():
    cubin, log = compile_cubin("sm_90")
    assert cubin[:4] == b"\x7fELF" and log == ""
    # NVRTC writes its log's NUL into the buffer it is given: a 1-byte buffer would be CPython's shared
    # b" " (b" " * 1 returns it), and every b" " in the process would read b"\x00" afterwards
    one = len(log) + 1  # not a constant, so that the multiplication happens at run time
    assert (b" " * one)[0] == 32
