"""Who a process is: its container or pod from /proc/PID/cgroup (the runtimes' path patterns,
fabricated here) and its pid in its own PID namespace (a real process under ``unshare -p``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time

import pytest

from vmmtui.fleet.facts import container_of
from vmmtui.stream.events import ProcessSeen
from vmmtui.trace.identity import Container, identity_of, parse_cgroup, parse_nspid
from vmmtui.trace.procfs.follow import Follower
from vmmtui.view.model import ScreenState, fold
from vmmtui.words.narration import process_seen

ID = "3f2a1b4c5d6e" + "a" * 52
UID = "1d2e3f40-5a6b-7c8d-9e0f-a1b2c3d4e5f6"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (f"0::/system.slice/docker-{ID}.scope\n", Container("docker", ID[:12])),
        (f"12:memory:/docker/{ID}\n0::/\n", Container("docker", ID[:12])),  # hybrid, cgroupfs
        (f"0::/system.slice/crio-{ID}.scope\n", Container("cri-o", ID[:12])),
        (f"0::/machine.slice/libpod-{ID}.scope/container\n", Container("podman", ID[:12])),
        (f"0::/default/{ID}\n", Container("", ID[:12])),  # nerdctl: the runtime is not named
        (
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
            f"{UID.replace('-', '_')}.slice/cri-containerd-{ID}.scope\n",
            Container("containerd", ID[:12], UID),
        ),
        (f"0::/kubepods/besteffort/pod{UID}/{ID}\n", Container("kubepods", ID[:12], UID)),
        (f"0::/kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice\n", Container("kubepods", "", UID)),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("0::/\n", None),
        ("", None),
    ],
)  # fmt: skip
def test_the_container_or_pod_is_read_from_the_runtimes_cgroup_paths(text, want):
    assert parse_cgroup(text) == want


def test_labels_are_short_and_say_the_pod():
    assert Container("docker", ID[:12]).label() == "docker 3f2a1b4c5d6e"
    assert Container("containerd", ID[:12], UID).label() == f"pod {UID}/containerd 3f2a1b4c5d6e"


def test_a_fabricated_proc_root_gives_the_metrics_label(tmp_path):
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "cgroup").write_text(f"0::/system.slice/docker-{ID}.scope\n")
    (tmp_path / "42" / "status").write_text("Name:\tx\nNSpid:\t42\t7\n")
    who = identity_of(42, tmp_path)
    assert who.container == Container("docker", ID[:12]) and who.inner_pid == 7
    assert container_of(42, tmp_path) == "docker 3f2a1b4c5d6e"
    assert parse_nspid("NSpid:\t42\n") == (42,) and identity_of(43, tmp_path).inner_pid is None


@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1)")
def test_a_process_in_its_own_pid_namespace_says_its_pid_there():
    outer = subprocess.Popen(["unshare", "-p", "-f", "--kill-child", "--mount-proc", "sleep", "30"])
    inner = None
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and inner is None:
            kids = subprocess.run(
                ["pgrep", "-P", str(outer.pid)], capture_output=True, text=True
            ).stdout.split()
            inner = int(kids[0]) if kids else None
            time.sleep(0.05)
        if inner is None:
            pytest.skip("unshare -p did not start a child here (no CAP_SYS_ADMIN?)")
        assert identity_of(inner).inner_pid == 1
        assert identity_of(outer.pid).inner_pid is None
        events = Follower({inner}, use_nvml=False).poll()
        [seen] = [e for e in events if isinstance(e, ProcessSeen)]
        assert seen.inner_pid == 1
        assert "pid 1 in its own PID namespace" in process_seen(seen).plain
        back = ProcessSeen.from_json(seen.to_json())
        assert back == seen  # JSON carries it
        state = fold(events, ScreenState.for_programs())
        assert state.programs is not None and state.programs.procs[inner].inner_pid == 1
    finally:
        if inner is not None:  # the namespace's init: its end ends the namespace
            with contextlib.suppress(ProcessLookupError):
                os.kill(inner, signal.SIGKILL)
        outer.kill()
        outer.wait(timeout=10)


class _Info:
    def __init__(self, pid: int, used: int):
        self.pid, self.used_gpu_memory = pid, used


class _NvmlLib:
    """The two calls of cuda.bindings.nvml that ``Nvml.usage`` makes, answering as the driver
    would for two GPUs (only the UUID mapping is under test; no GPU here)."""

    def device_get_compute_running_processes_v3(self, handle):
        return [_Info(7, 1 << 20)] if handle == "h0" else []


def test_gpus_are_named_by_the_uuid_nvml_gave_and_none_without_nvml():
    from vmmtui.trace.procfs.nvml import Nvml
    from vmmtui.words.narration import gpu_memory

    nvml = Nvml(
        None, [0, 1], ["h0", "h1"], {0: "GPU-0f1e2d3c-aaaa-bbbb-cccc-000000000000"}, _NvmlLib()
    )
    got = nvml.usage([7])[7]
    assert got.uuids == {0: "GPU-0f1e2d3c-aaaa-bbbb-cccc-000000000000"}
    assert "GPU 0 GPU-0f1e2d3c-aaaa-bbbb-cccc-000000000000: 1 MiB" in gpu_memory(got).plain
    missing = Nvml(error="NVML unavailable: no driver").usage([7])[7]
    assert missing.uuids == {} and "GPU-" not in gpu_memory(missing).plain


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare(1)")
def test_the_ebpf_trace_says_a_process_runs_in_its_own_pid_namespace(ebpf):
    """A real trace of a command that starts a PID namespace: the program run in there is pid 1
    in it, said once it runs (``ProcessIdentity``), in --json and in the text."""
    import json
    import sys

    # the program in there makes a memfd: a call worth a line, so its process is shown in the text
    code = "import os, time; os.memfd_create('in-a-namespace'); time.sleep(0.2)"
    cmd = ["unshare", "-p", "-f", "--kill-child", "--mount-proc", sys.executable, "-c", code]
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--no-cuda", "--", *cmd],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    said = [json.loads(x) for x in res.stdout.splitlines() if '"ProcessIdentity"' in x]
    assert said and said[-1]["inner_pid"] == 1, res.stdout[-2000:]
    text = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--text", "--no-cuda", "--", *cmd],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert text.returncode == 0, text.stderr[-2000:]
    assert "pid 1 in its own PID namespace" in text.stdout, text.stdout[-2000:]
    assert "Traceback" not in text.stderr
