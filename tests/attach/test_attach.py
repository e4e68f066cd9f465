"""attach on real processes: bad input, other users, kcmp as a sorting comparator, the JSON round
trip of every attach event, and the view driven by Pilot."""

import os
import socket
import subprocess
import sys
import time

import pytest

from tests.attach.helpers import FIXTURES, of, vmmtui, watch_json
from vmmtui.attach.nvml import Nvml
from vmmtui.attach.scan import children, scan
from vmmtui.attach.shares import find_shares
from vmmtui.events import AttachEvent, Event, ProcessUnreadable
from vmmtui.fdtable import KcmpUnavailable, kcmp_order


def test_a_pid_that_does_not_exist_is_said_and_exits_1():
    res = vmmtui("attach", "--once", "999999999")
    assert res.returncode == 1
    assert "pid 999999999: no such process" in res.stdout and "Traceback" not in res.stderr


def test_a_missing_pid_among_good_ones_is_said_and_the_rest_shown():
    res = vmmtui("attach", "--once", "--json", str(os.getpid()), "999999999")
    assert res.returncode == 0
    events = [Event.from_json(x) for x in res.stdout.splitlines()]
    assert [e.pid for e in of(events, ProcessUnreadable)] == [999999999]


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


def test_the_only_pid_missing_does_not_speak_of_others():
    res = vmmtui("attach", "--once", "999999999")
    assert res.returncode == 1 and "others" not in res.stdout + res.stderr
    assert res.stderr.startswith("vmmtui attach: the process could not be read")
    assert len(res.stderr.strip().splitlines()) == 1


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
            from vmmtui.attach.follow import Follower
            from vmmtui.narration import attach_lines

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
        from vmmtui.attach.scan import OpenFd, ProcessScan

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


def test_every_attach_event_of_real_runs_round_trips():
    events = []
    for fixture in ("scm_pair.py", "leak_received.py"):
        events += watch_json(fixture)[1]
    res = vmmtui("attach", "--json", "--can", str(os.getpid()), str(os.getppid()))
    events += [Event.from_json(x) for x in res.stdout.splitlines()]
    events += [
        Event.from_json(x)
        for x in vmmtui("attach", "--once", "--json", "999999999").stdout.splitlines()
    ]
    events += list(Nvml.open().usage([os.getpid()]).values())  # NVML's answer, or why it has none
    seen = set()
    for e in events:
        line = e.to_json()
        assert Event.from_json(line) == e and Event.from_json(line).to_json() == line
        seen.add(type(e).__name__)
    from vmmtui.trace.events import TraceEvent  # trace's own: tests/trace round-trips them

    attach_types = {
        n
        for n, c in Event.types.items()
        if issubclass(c, AttachEvent) and c is not AttachEvent and not issubclass(c, TraceEvent)
    }
    assert attach_types <= seen, f"never produced: {attach_types - seen}"


def test_the_view_shows_the_pair_and_what_they_share():
    import asyncio

    from vmmtui.tui.attach import AttachApp

    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "scm_pair.py")],
        cwd=FIXTURES,
        env={**os.environ, "FIXTURE_HOLD": "1.0"},
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        kids = children(proc.pid)

        async def go():
            app = AttachApp([proc.pid, *kids])
            async with app.run_test(size=(160, 48)) as pilot:
                for _ in range(40):
                    await pilot.pause(0.1)
                    if app.board and any(
                        getattr(f, "kind", "") == "memfd"
                        for f in app.board.shares + app.board.earlier
                    ):
                        break
                table = app.query_one("#procs")
                assert table.row_count == 2
                shares = str(app.query_one("#shares").render())
                assert "fixture-scm" in shares, shares
                await pilot.press("q")

        asyncio.run(go())
    finally:
        proc.wait(timeout=20)


def test_nvml_opened_ahead_is_closed_even_when_no_process_needed_it(monkeypatch):
    """attach --once starts NVML in a thread on a GPU box (overlapping its imports and the scan); a
    follower that never needed it still closes what was opened."""
    from concurrent.futures import Future

    from vmmtui.attach.follow import Follower

    closed = []
    soon: Future = Future()
    nvml = Nvml(error="not opened in this test")
    monkeypatch.setattr(nvml, "close", lambda: closed.append(True))
    soon.set_result(nvml)
    f = Follower({os.getpid()}, nvml_soon=soon)
    f.poll()  # this process holds no /dev/nvidia* fd: NVML is not asked
    assert f.nvml is None and f.nvml_soon is soon
    f.close()
    assert closed == [True] and f.nvml_soon is None
    if not os.path.exists("/dev/nvidiactl"):
        assert Nvml.opening() is None  # no driver: nothing started


@pytest.mark.parametrize("where", ["/nonexistent-dir/view.svg", "/tmp"])
def test_a_screenshot_that_cannot_be_written_is_one_line_before_any_scan(where):
    res = vmmtui("attach", "--screenshot", where, "--duration", "0.5", str(os.getpid()))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stderr.startswith(f"vmmtui attach: --screenshot {where}: ")
    assert res.stderr.count("\n") == 1 and not res.stdout
