"""attach on real processes: bad input, other users, kcmp as a sorting comparator and the JSON round
trip of every attach event (attach as an alias of trace: tests/trace/procfs/test_aliases.py)."""

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.commands import vmmtui
from tests.trace.procfs.helpers import watch_json
from vmmtui.stream.events import AttachEvent, Event
from vmmtui.system.fdtable import KcmpUnavailable, kcmp_order
from vmmtui.trace.procfs.nvml import Nvml
from vmmtui.trace.procfs.scan import scan
from vmmtui.trace.procfs.shares import find_shares


def test_a_pid_that_does_not_exist_is_bad_input_in_one_line_as_for_trace():
    for args in (["--once", "999999999"], [str(os.getpid()), "999999999"]):
        res = vmmtui("attach", *args)
        assert res.returncode == 2 and res.stderr == "vmmtui attach: no process 999999999\n", res
        assert not res.stdout


@pytest.mark.parametrize("args", [[], ["0"], ["--can", "1"]])
def test_bad_input_exits_2_in_one_line(args):
    res = vmmtui("attach", *args)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_bad_pid_is_worded_once_and_alike_for_pids_and_can():
    plain, can = vmmtui("attach", "0"), vmmtui("attach", "--can", "0", "0")
    assert plain.returncode == can.returncode == 2
    assert plain.stderr == can.stderr == "vmmtui attach: 0 is not a process id\n", (plain, can)
    assert can.stdout == ""
    gone = vmmtui("attach", "--can", "999999999", "999999999")
    assert gone.returncode == 2 and gone.stdout.count("does not exist") <= 1, gone


def test_the_kcmp_lines_name_kcmp_once():
    fd = os.memfd_create("fixture-verdict-line", 0)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        pass_fds=(fd,),
    )
    try:
        res = vmmtui("attach", "--once", str(os.getpid()), str(child.pid))
    finally:
        child.stdin.close()
        child.wait()
        os.close(fd)
    lines = [x for x in res.stdout.splitlines() if "kcmp" in x]
    assert any("≡" in x for x in lines), res.stdout
    assert all(x.count("kcmp") == 1 for x in lines), lines


def test_can_with_a_pid_that_does_not_exist_exits_2():
    res = vmmtui("attach", "--can", str(os.getpid()), "999999999")
    assert res.returncode == 2 and "does not exist" in res.stdout


def _as_nobody(target: int) -> str:
    """What a process of another user (nobody) gets from kcmp and from attach's scan of ``target``."""
    r, w = os.pipe()
    pid = os.fork()
    if (
        pid == 0
    ):  # the child: no exec (nobody may not read this venv); report through the pipe, _exit
        try:
            os.setgid(65534)
            os.setuid(65534)
            from vmmtui.trace.procfs.follow import Follower
            from vmmtui.words.narration import attach_lines

            try:
                kcmp_order(target, 0, target, 1)
                said = "kcmp answered"
            except KcmpUnavailable as exc:
                said = f"unavailable {exc.strerror}"
            f = Follower({target}, use_nvml=False)
            said += "\n" + "\n".join(x.plain for e in f.poll() for x in attach_lines(e))
            os.write(w, said.encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        out = f.read()
    os.waitpid(pid, 0)
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a second user")
def test_another_users_process_is_no_permission_and_kcmp_unavailable_with_errno():
    out = _as_nobody(os.getpid())
    assert "unavailable kcmp failed with EPERM" in out, out
    assert f"pid {os.getpid()}: no permission" in out, out


def test_kcmp_sorts_open_file_descriptions_in_n_log_n(tmp_path):
    """Two processes, 40 opens of one file (one inode, 40 descriptions) with dups: the runs are the truth."""
    path = tmp_path / "f"
    path.write_bytes(b"x")
    fds = [os.open(path, os.O_RDONLY) for _ in range(40)]
    dups = [os.dup(fds[i]) for i in range(0, 40, 4)]
    r, w = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=r,
        pass_fds=fds[:10] + dups[:3],
    )
    os.close(r)
    try:
        time.sleep(0.3)
        s = scan([os.getpid(), child.pid])
        assert not s.processes[os.getpid()].fds  # a plain file is not a kind attach shows
        from vmmtui.trace.procfs.scan import OpenFd, ProcessScan

        st = os.stat(path)
        for pid, own in ((os.getpid(), fds + dups), (child.pid, fds[:10] + dups[:3])):
            p: ProcessScan = s.processes[pid]
            p.fds = {fd: OpenFd(fd, str(path), "memfd", st.st_dev, st.st_ino) for fd in own}
        shares = find_shares(s)
        n = len(fds) + len(dups) + 13
        assert shares.kcmp_calls <= 2 * n * n.bit_length()
        across = [f for f in shares.files if f.same_description]
        assert len(across) == 10  # the 10 descriptions the child inherited, each with its dups
        for f in across:
            assert len({h.pid for h in f.holders}) == 2
    finally:
        os.close(w)
        child.wait()
        for fd in fds + dups:
            os.close(fd)


def test_kcmp_order_is_a_comparator_on_real_fds():
    a, b = socket.socketpair()
    try:
        me = os.getpid()
        assert kcmp_order(me, a.fileno(), me, a.fileno()) == 0
        x, y = (
            kcmp_order(me, a.fileno(), me, b.fileno()),
            kcmp_order(me, b.fileno(), me, a.fileno()),
        )
        assert {x, y} == {-1, 1}
        with pytest.raises(KcmpUnavailable):
            kcmp_order(me, 999999, me, a.fileno())
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_every_attach_event_of_real_runs_round_trips(tmp_path):
    from tests.tracing import fake_nvml

    events = []
    for fixture in ("scm_pair.py", "leak_received.py"):
        events += watch_json(fixture)[1]
    # NVML's readings and the GPU table they make: attach --once through the stand-in NVML
    (tmp_path / "charges").write_text(f"gpu 0 GPU-fake-0 150000000000\nproc 0 {os.getpid()} 1\n")
    env = {"VMMTUI_NVML": str(fake_nvml(tmp_path)), "VMMTUI_FAKE_NVML": str(tmp_path / "charges")}
    res = vmmtui("attach", "--once", "--json", str(os.getpid()), env=env)
    events += [Event.from_json(x) for x in res.stdout.splitlines() if x.startswith("{")]
    res = vmmtui("attach", "--json", "--can", str(os.getpid()), str(os.getppid()))
    events += [Event.from_json(x) for x in res.stdout.splitlines()]
    from vmmtui.trace.procfs.follow import Follower

    events += Follower({999999999}, use_nvml=False).poll()  # ProcessUnreadable
    events += list(Nvml.open().usage([os.getpid()]).values())  # NVML's answer, or why it has none
    seen = set()
    for e in events:
        line = e.to_json()
        assert Event.from_json(line) == e and Event.from_json(line).to_json() == line
        seen.add(type(e).__name__)
    from vmmtui.stream.observed import TraceEvent  # trace's own: tests/trace round-trips them

    attach_types = {
        n
        for n, c in Event.types.items()
        if issubclass(c, AttachEvent) and c is not AttachEvent and not issubclass(c, TraceEvent)
    }
    assert attach_types <= seen, f"never produced: {attach_types - seen}"


def test_nvml_opened_ahead_is_closed_even_when_no_process_needed_it(monkeypatch):
    """attach --once starts NVML in a thread on a GPU box (overlapping its imports and the scan); a
    follower whose processes hold no GPU fd asks it only for its reading of the GPUs (the GPU
    ledger's ``NvmlSample``), and closes what was opened."""
    from concurrent.futures import Future

    from vmmtui.trace.procfs.follow import Follower

    closed = []
    soon: Future = Future()
    nvml = Nvml(error="not opened in this test")
    monkeypatch.setattr(nvml, "close", lambda: closed.append(True))
    soon.set_result(nvml)
    # a process that holds no /dev/nvidia* fd (this one may, on a GPU box, after a GPU test)
    idle = subprocess.Popen(["sleep", "30"])
    try:
        f = Follower({idle.pid}, nvml_soon=soon)
        events = f.poll()  # NVML is asked for its reading of the GPUs only (the GPU ledger's)
        assert [e.error for e in events if type(e).__name__ == "NvmlSample"] == [nvml.error]
        assert f.nvml is nvml and f.nvml_soon is None
        f.close()
    finally:
        idle.kill()
        idle.wait()
    assert closed == [True] and f.nvml is None
    if not os.path.exists("/dev/nvidiactl"):
        assert Nvml.opening() is None  # no driver: nothing started


def test_the_screenshot_of_the_attach_view_that_went_is_refused_in_one_line(tmp_path):
    res = vmmtui(
        "attach", "--screenshot", "view.svg", "--duration", "0.5", str(os.getpid()), cwd=tmp_path
    )
    assert res.returncode == 2 and not res.stdout and res.stderr.count("\n") == 1, res
    assert res.stderr.startswith("vmmtui attach: --screenshot: ") and "--record" in res.stderr
    assert not (tmp_path / "view.svg").exists()


def test_the_preflight_travels_as_codes_and_facts_and_is_worded_where_drawn():
    """Each check of ``attach --can`` is a code and its facts, no sentence; words/preflight.py
    words every code; a check an older vmmtui wrote in words reads as it did, and a code this
    version does not know shows its facts."""
    from vmmtui.stream.events import PreflightCheck
    from vmmtui.trace.procfs.preflight import preflight
    from vmmtui.words import narration
    from vmmtui.words.preflight import WORDS, worded

    child = subprocess.Popen(["sleep", "30"])
    try:
        checks = preflight(os.getpid(), child.pid, device=False)
    finally:
        child.kill()
        child.wait()
    assert checks and all(c.code in WORDS for c in checks), [c.code for c in checks]
    assert not any(c.finding or c.cause or c.fix for c in checks)
    said = {c.name: worded(c) for c in checks}
    assert said["processes"][0] == f"A = pid {os.getpid()}, B = pid {child.pid}"
    assert said["pid namespace"] == ("the same", "", "")
    assert said["after sharing"][2].endswith("`vmmtui watch -- CMD` reports all three")
    old = PreflightCheck(1, 2, "same uid", False, "then", "the cause then", "the fix then")
    assert [t.plain for t in narration.preflight(old)] == [
        "✗ same uid: then", "    cause: the cause then", "    fix:   the fix then"
    ]  # fmt: skip
    assert worded(PreflightCheck(1, 2, "x", None, code="newer", facts={"n": 1})) == (
        "newer: n 1",
        "",
        "",
    )
    assert worded(PreflightCheck(1, 2, "x", None, code="same-uid")) == ("same-uid", "", "")
