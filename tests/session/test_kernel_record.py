"""The kernel's own record of the demo's workers (eBPF): real memfd runs, as root.

Runs that need eBPF skip with the reason where it is unavailable, as the trace tests do; the
fallback's line is forced with a real privilege drop (``setpriv``: root without capabilities) and
with ``VMMTUI_NO_EBPF``."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from vmmtui.plan.steps import build_plan
from vmmtui.session.kernel import OFF_ENV

#: the slow tier: each is a whole run with the probe loaded (README)
pytestmark = pytest.mark.slow

PLAN = build_plan()


@pytest.fixture(autouse=True)
def kernel_wanted(monkeypatch):
    """The suite turns eBPF off for the other tests (conftest): on here."""
    monkeypatch.delenv(OFF_ENV, raising=False)


def run(tmp_path, *args, prefix=(), env=None):
    res = subprocess.run(
        [*prefix, sys.executable, "-m", "vmmtui", "run", "--backend", "memfd"] + list(args),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TMPDIR": str(tmp_path), **(env or {})},
    )
    assert os.listdir(tmp_path) == [], "the run left something in its directory"
    return res


def events_of(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_run_json_carries_the_kernels_send_and_receive_with_kcmps_file(tmp_path, ebpf):
    res = run(tmp_path, "--json")
    assert res.returncode == 0, res.stderr
    ev = events_of(res.stdout)
    pids = {e["role"]: e["pid"] for e in ev if e["event"] == "WorkerStarted"}
    socket_path = next(e["socket_path"] for e in ev if e["event"] == "SessionStarted")
    started = next(e for e in ev if e["event"] == "TraceStarted")
    assert started["mode"] == "ebpf" and set(started["targets"]) == set(pids.values())
    # the producer's send on the session's socket, in its send step, before the step's answer
    send_at = next(
        i for i, e in enumerate(ev) if e["event"] == "StepStarted" and e["step"] == "send"
    )
    send_done = next(
        i for i, e in enumerate(ev) if e["event"] == "StepDone" and e["report"]["step"] == "send"
    )
    sent = [
        (i, e)
        for i, e in enumerate(ev)
        if e["event"] == "FdsSent" and e["sock"]["name"] == socket_path
    ]
    assert len(sent) == 1, sent
    i, fs = sent[0]
    assert fs["pid"] == pids["producer"] and send_at < i < send_done
    # the consumer's receive, of the same struct file, in its receive step
    recv_at = next(
        i for i, e in enumerate(ev) if e["event"] == "StepStarted" and e["step"] == "receive"
    )
    recv_done = next(
        i for i, e in enumerate(ev) if e["event"] == "StepDone" and e["report"]["step"] == "receive"
    )
    got = [
        (i, e)
        for i, e in enumerate(ev)
        if e["event"] == "FdsReceived" and e["sock"]["name"] == socket_path
    ]
    assert len(got) == 1, got
    j, fr = got[0]
    assert fr["pid"] == pids["consumer"] and recv_at < j < recv_done
    assert fr["files"] == fs["files"] and fs["files"][0]
    # the same pair of fds that kcmp, asked by the session, found to be one open file
    kcmp = next(e for e in ev if e["event"] == "KcmpVerdict")
    assert kcmp["same"] is True
    assert (kcmp["producer_fd"], kcmp["consumer_fd"]) == (fs["fds"][0], fr["fds"][0])
    assert (kcmp["producer_pid"], kcmp["consumer_pid"]) == (pids["producer"], pids["consumer"])
    # the record ends, probes detached, before the session says it closed cleanly
    names = [e["event"] for e in ev]
    assert names.index("TraceFinished") < names.index("SessionClosed")
    finished = ev[names.index("TraceFinished")]
    assert finished["lost"] == 0 and finished["events"] >= 2
    assert ev[-1]["event"] == "SessionClosed" and ev[-1]["clean"]


def test_run_prints_the_kernels_line_under_the_step_and_no_kernel_hides_it(tmp_path, ebpf):
    res = run(tmp_path)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    received = next(k for k, line in enumerate(lines) if "Received FD:" in line)
    fd = lines[received].split("Received FD:")[1].split(",")[0].strip()
    kernel = lines[received + 1]
    assert kernel.startswith("consumer │   kernel: producer sendmsg SCM_RIGHTS fd "), kernel
    assert kernel.endswith(f"→ consumer fd {fd} (recvmsg), same struct file")
    off = run(tmp_path, "--no-kernel", "--json")
    assert off.returncode == 0, off.stderr
    names = {e["event"] for e in events_of(off.stdout)}
    assert not names & {"TraceStarted", "FdsSent", "FdsReceived", "TraceFinished"}
    assert "not shown" not in off.stdout


@pytest.mark.parametrize("how", ["env", "no-libbpf", "not-libbpf", "no-capabilities"])
def test_without_ebpf_one_line_says_why_and_the_run_is_as_before(tmp_path, how):
    if how == "env":
        res = run(tmp_path, "--json", env={OFF_ENV: "1"})
        why = f"{OFF_ENV} is set"
    elif how == "no-libbpf":  # found missing before any load
        res = run(tmp_path, "--json", env={"VMMTUI_LIBBPF": str(tmp_path / "libbpf.so.1")})
        why = "libbpf.so.1 is not installed"
    elif how == "not-libbpf":  # refused by the loader, in its thread
        res = run(tmp_path, "--json", env={"VMMTUI_LIBBPF": "/etc/hostname"})
        why = "cannot load libbpf (/etc/hostname)"
    else:
        if shutil.which("setpriv") is None or os.geteuid() != 0:
            pytest.skip("needs root and setpriv to drop the capabilities")
        res = run(tmp_path, "--json", prefix=["setpriv", "--bounding-set=-all", "--inh-caps=-all"])
        why = "eBPF needs root or CAP_BPF and CAP_PERFMON (root without the capabilities)"
    assert res.returncode == 0, res.stderr
    ev = events_of(res.stdout)
    said = [e["text"] for e in ev if e["event"] == "Notice" and "kernel's own record" in e["text"]]
    assert len(said) == 1, said
    assert why in said[0] and "sudo" in said[0]
    assert not any(e["event"].startswith(("Trace", "Fds")) for e in ev)
    assert ev[-1]["event"] == "SessionClosed" and ev[-1]["clean"]


def bpf_fds() -> list[str]:
    """This process's fds on BPF objects (links, programs, maps): what the probe holds."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("anon_inode:bpf"):
            out.append(target)
    return out


def test_the_probe_detaches_when_the_session_closes_mid_plan(tmp_path, ebpf):
    from vmmtui.plan.config import SessionConfig
    from vmmtui.session import Session
    from vmmtui.stream.events import SessionClosed
    from vmmtui.stream.observed import TraceFinished

    before = bpf_fds()
    s = Session(SessionConfig(backend="memfd", size=1 << 16, tmpdir=str(tmp_path), kernel=True))
    try:
        s.start()
        for _ in range(3):
            s.step()
        assert s.kernel.on
        assert any(t == "anon_inode:bpf_link" for t in bpf_fds()), bpf_fds()
    finally:
        closing = s.close()
    # the close said the record ended, then that nothing was left behind; the links are gone
    assert [type(e) for e in closing][-1] is SessionClosed and closing[-1].clean
    assert any(isinstance(e, TraceFinished) for e in closing)
    assert not s.kernel.on and bpf_fds() == before
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signalled_run_leaves_no_probe_behind(tmp_path, ebpf, sig):
    """SIGTERM: the close ends the record (its links destroyed) and says so; SIGKILL: the links
    were fds of the killed process only (no worker inherited one), so they went with it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "run", "--backend", "memfd", "--json"]
        + ["--scenario", "consumer-hangs", "--timeout", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    seen, workers = [], []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            e = json.loads(line)
            seen.append(e["event"])
            if e["event"] == "WorkerStarted":
                workers.append(e["pid"])
            if e["event"] == "StepStarted" and e["step"] == "wait_ack":
                break
        assert "TraceStarted" in seen
        assert all(not holds_bpf(p) for p in workers)  # the workers never had the probe's fds
        assert holds_bpf(proc.pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM and "Traceback" not in err, err
        rest = [json.loads(line)["event"] for line in out.splitlines()]
        assert "TraceFinished" in rest and rest[-1] == "SessionClosed"
    else:
        assert proc.returncode == -signal.SIGKILL
    for _ in range(100):  # the workers follow their parent (their lifeline), the directory goes
        if not any(os.path.exists(f"/proc/{p}") for p in workers) and not os.listdir(tmp_path):
            break
        time.sleep(0.1)
    assert not any(os.path.exists(f"/proc/{p}") for p in workers)
    assert not os.path.exists(f"/proc/{proc.pid}")
    assert os.listdir(tmp_path) == []


def holds_bpf(pid: int) -> bool:
    """Whether ``pid`` holds an fd on a BPF link, program or map."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("anon_inode:bpf"):
                return True
        except OSError:
            continue
    return False
