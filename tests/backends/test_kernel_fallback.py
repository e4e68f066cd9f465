"""Where the fill/verify kernels cannot load, --verify auto checks on the host and says why; --verify device fails."""

import pytest

from vmmtui.backends import Choice
from vmmtui.backends.probe import DeviceRecord
from vmmtui.plan.config import resolve_verify
from vmmtui.words.troubleshooting import explain, worded

WHY = "the driver cannot JIT the shipped PTX 9.0 sm_75 (CUDA_ERROR_UNSUPPORTED_PTX_VERSION)"


def test_auto_falls_back_to_the_host_with_one_line_only_where_the_kernels_cannot_load():
    assert resolve_verify("auto", "cuda") == ("device", None)
    on, line = resolve_verify("auto", "cuda", WHY)
    assert on == "host" and line.startswith("--verify auto checks on the host") and WHY in line
    assert resolve_verify("device", "cuda", WHY) == (
        "device",
        None,
    )  # asked for: fails with cause and fix
    assert resolve_verify("both", "cuda", WHY) == ("both", None)
    assert resolve_verify("auto", "memfd") == ("host", None)


def test_the_choice_carries_the_probe_answer():
    assert (
        Choice(
            "cuda", "", device_probe=DeviceRecord(0, "gpu", kernels_tried=True, kernels_error=WHY)
        ).kernels_error
        == WHY
    )
    assert (
        Choice(
            "cuda", "", device_probe=DeviceRecord(0, "gpu", kernels_tried=True, kernels="PTX")
        ).kernels_error
        is None
    )
    assert Choice("memfd", "").kernels_error is None


def test_a_ptx_load_failure_names_the_driver_and_the_fixes():
    cause, fix = explain("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "cuModuleLoadData (PTX)")
    assert "R580" in cause and "nvidia-cuda-nvrtc" in fix and "--verify host" in fix
    cause, fix = explain("NVRTC_ERROR", "nvrtcCompileProgram")
    assert "second way" in cause and "shipped PTX" in fix


@pytest.fixture
def future_ptx(tmp_path, monkeypatch):
    """A PTX whose ISA no driver knows, and no NVRTC: what a driver older than the shipped PTX meets."""
    from vmmtui.backends.kernel_image import NVRTC_ENV, PTX_ENV, PTX_FILE

    future = tmp_path / "future.ptx"
    future.write_text(PTX_FILE.read_text().replace(".version 9.0", ".version 99.0"))
    monkeypatch.setenv(PTX_ENV, str(future))
    monkeypatch.setenv(NVRTC_ENV, "0")
    return future


@pytest.mark.gpu
def test_cuda_auto_checks_on_the_host_when_the_kernels_cannot_load(future_ptx, clean_state):
    from vmmtui.plan.config import SessionConfig
    from vmmtui.session import Session
    from vmmtui.stream.events import Notice, SessionClosed

    s = Session(SessionConfig(backend="cuda", tmpdir=str(clean_state)))
    events = s.lifetime()
    notes = [
        e.text
        for e in events
        if isinstance(e, Notice) and e.text.startswith("--verify auto checks on the host")
    ]
    print("\n" + "\n".join(notes))
    assert len(notes) == 1 and "CUDA_ERROR_" in notes[0] and "NVRTC is not available" in notes[0]
    assert (
        s.verify_on == "host"
        and s.verified
        and isinstance(events[-1], SessionClosed)
        and events[-1].clean
    )


@pytest.mark.gpu
def test_cuda_verify_device_asked_for_fails_with_cause_and_fix(future_ptx, clean_state):
    from vmmtui.plan.config import SessionConfig
    from vmmtui.session import Session
    from vmmtui.stream.events import SessionClosed

    s = Session(SessionConfig(backend="cuda", tmpdir=str(clean_state), verify="device"))
    events = s.lifetime()
    print("\n" + s.failure.one_line())
    assert (
        not s.verified
        and s.failure.call == "cuModuleLoadData (PTX)"
        and "R580" in worded(s.failure)[0]
    )
    assert s.failed_at[1] == "init" and isinstance(events[-1], SessionClosed) and events[-1].clean
