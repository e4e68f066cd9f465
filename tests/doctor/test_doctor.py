"""doctor says what is true of fabric handles and of the fill/verify kernels, from what the probe really tried."""

from dataclasses import replace

import pytest

from vmmtui.backends.probe import DeviceRecord, ProbeRecord
from vmmtui.doctor import checks
from vmmtui.doctor.checks import fabric_finding, kernels_finding

H100 = DeviceRecord(
    index=0,
    name="NVIDIA H100 80GB HBM3",
    compute_capability="9.0",
    vmm=True,
    posix_fd=True,
    fabric=True,
    ipc_event=True,
    granularity_min=2 << 20,
    granularity_rec=2 << 20,
    mem_free=80 << 30,
    mem_total=81 << 30,
    fabric_create="CUDA_ERROR_NOT_PERMITTED",
    kernels_tried=True,
    kernels_error=None,
    kernels="PTX 9.0 sm_75, JIT-compiled by the driver",
)
NO_CHANNEL = "no /dev/nvidia-caps-imex-channels"


def test_the_attribute_alone_is_not_a_yes():
    f = fabric_finding("device 0", H100, NO_CHANNEL)
    assert f.value.startswith("supported by the device, not usable here: no IMEX channel")
    assert "CUDA_ERROR_NOT_PERMITTED" in f.value and NO_CHANNEL in f.value and "(fix: " in f.value
    assert "nvidia-imex" in f.value and f.ok is None


def test_fabric_that_works_or_is_not_there_is_said_so():
    works = fabric_finding(
        "device 0",
        replace(H100, fabric_create="CUDA_SUCCESS"),
        "/dev/nvidia-caps-imex-channels: channel0",
    )
    assert works.ok and works.value.startswith("usable") and "channel0" in works.value
    absent = fabric_finding("device 0", replace(H100, fabric=False, fabric_create=None), NO_CHANNEL)
    assert absent.value.startswith("not supported by the device")
    other = fabric_finding(
        "device 0", replace(H100, fabric_create="CUDA_ERROR_NOT_SUPPORTED"), NO_CHANNEL
    )
    assert "not usable here" in other.value and "CUDA_ERROR_NOT_SUPPORTED" in other.value


def test_kernels_that_cannot_load_say_that_auto_checks_on_the_host():
    assert (
        kernels_finding("device 0", H100).ok
        and "JIT-compiled by the driver" in kernels_finding("device 0", H100).value
    )
    bad = kernels_finding(
        "device 0", replace(H100, kernels_error="the driver cannot JIT the shipped PTX")
    )
    assert bad.ok is False and "--verify auto checks on the host" in bad.value
    assert kernels_finding("device 0", DeviceRecord(0, "no VMM")) is None


def test_doctor_prints_the_h100_as_it_is(monkeypatch, capsys):
    import argparse

    from vmmtui.cli.doctor import cmd_doctor

    monkeypatch.setattr(
        checks, "probe", lambda: ProbeRecord(True, driver_version=13000, devices=[H100])
    )
    monkeypatch.setattr(checks, "imex_channels", lambda: NO_CHANNEL)
    monkeypatch.setenv("COLUMNS", "200")
    assert cmd_doctor(argparse.Namespace(device=0)) == 0
    out = capsys.readouterr().out
    assert "fabric handles" in out and "not usable here: no IMEX channel" in out
    assert "fabric handles │ ✓ yes" not in out and "load (PTX 9.0 sm_75" in out
    assert "cuda backend" in out and "can run" in out


def test_the_pidfd_road_is_tried_for_real_on_a_child():
    f = checks.pidfd_finding()
    assert f.value.startswith("pidfd_getfd on a child: ")
    assert "seccomp" in f.value and "CAP_SYS_PTRACE" in f.value and "Yama" in f.value
    assert f.ok is ("works (took fd" in f.value)


def test_under_a_seccomp_filter_the_pidfd_road_says_eperm_and_the_fix():
    """A real process that refuses itself pidfd_getfd, as a Docker container does, then asks doctor."""
    import re
    import subprocess
    import sys

    code = (
        "from vmmtui.backends import pidfd; from vmmtui.doctor import checks; pidfd.deny_pidfd_getfd(); "
        "f = checks.pidfd_finding(); print(f.ok); print(f.value)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    ok, value = out.stdout.split("\n", 1)
    assert ok == "False" and "EPERM" in value
    assert re.search(r"seccomp filter \(\d+ filter\(s\)\)", value), value
    assert "fix: --transport scm-rights" in value


def test_pools_say_whether_the_pool_road_can_run():
    yes = checks.pool_finding("device 0", replace(H100, memory_pools=True, pool_handle_types=9))
    assert yes.ok and "--mechanism pool can run" in yes.value
    no_fd = checks.pool_finding("device 0", replace(H100, memory_pools=True, pool_handle_types=8))
    assert no_fd.ok is False and "no POSIX fd" in no_fd.value
    none = checks.pool_finding("device 0", replace(H100, memory_pools=False))
    assert none.ok is False and "cannot run" in none.value


def _trace_lines() -> dict[str, tuple[str, bool | None]]:
    found: list = []
    checks.trace_findings(found.append)
    return {f.name.strip(): (f.value, f.ok) for f in found}


def test_the_ebpf_line_says_where_libbpf_is_missing(monkeypatch):
    monkeypatch.setenv("VMMTUI_LIBBPF", "/nonexistent/libbpf.so.1")
    lines = _trace_lines()
    assert lines["eBPF trace"][1] is False
    assert "apt-get install libbpf1" in lines["libbpf"][0] and lines["libbpf"][1] is False
    assert lines["hooks"][1] is False and "not tried" in lines["hooks"][0]
    for name in ("BTF", "capabilities", "unprivileged_bpf_disabled"):
        assert name in lines


@pytest.mark.slow
def test_the_ebpf_line_names_the_hooks_a_real_load_accepted(ebpf):
    lines = _trace_lines()
    assert lines["eBPF trace"] == ("can run", True)
    assert lines["hooks"][1] is True
    assert lines["hooks"][0].split()[0] in ("tp_btf", "raw_tp")
