"""Polling claims only what it saw (issue 18 part 4), on real processes: a direction it could not
observe is "unknown", fds open before attach are checked for leaks, an fd closed between the scan
and kcmp is no kcmp failure, what may have been missed is said, and watch follows the tree until its
last process exits."""

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.trace.procfs.helpers import FIXTURES, ROOT, of, watch_json
from vmmtui.stream.events import FdOpened, Leak, Notice, ProcessGone, ProcessSeen, WatchFinished
from vmmtui.trace.procfs.follow import Follower
from vmmtui.trace.procfs.scan import scan
from vmmtui.trace.procfs.shares import find_shares
from vmmtui.words.leaks import said as leak_words
from vmmtui.words.troubleshooting import close_fix

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow


def test_an_fd_made_and_sent_within_one_poll_is_unknown_never_arrived_at_its_creator():
    res, events = watch_json("made_and_sent.py")
    assert res.returncode == 0, res.stderr
    opened = [e for e in of(events, FdOpened) if "fixture-made-sent" in e.target]
    creator = min(e.pid for e in opened)  # the parent: lower pid, started first
    mine = [e for e in opened if e.pid == creator]
    assert mine and all(e.how != "arrived" for e in mine), mine
    assert any(e.how == "unknown" and "not seen" in e.via for e in mine), mine
    theirs = [e for e in opened if e.pid != creator]
    assert all(e.source is None or e.source.pid == creator for e in theirs), theirs
    said = [e for e in of(events, Leak) if e.pid == creator]
    assert not [e for e in said if not e.kind.startswith("possible-")], said
    assert not [e for e in said if "received from" in leak_words(e)[1]], said


def _leak_received(hold: str) -> tuple[subprocess.Popen, int, int]:
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "leak_received.py")],
        cwd=FIXTURES,
        env={**os.environ, "FIXTURE_HOLD": hold},
        stdout=subprocess.PIPE,
        text=True,
    )
    child = None
    for line in proc.stdout:
        said = re.search(r"\[(\d+)\][^\[]*stays open", line)  # two processes share the pipe
        if said:
            child = int(said.group(1))
            break
    return proc, proc.pid, child


def test_fds_open_before_attach_are_checked_for_leaks():
    """attach after the child received the fd: it is "present" there, and once its sender exited and
    the child keeps it unmapped until it exits, that is said (as possible: its origin was not seen)."""
    import time

    proc, parent, child = _leak_received("1.0")
    events = []
    try:
        f = Follower({parent, child}, use_nvml=False, interval=0.1)  # attach's engine, at once
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            events += f.poll()
            if f.polls > 1 and not f.tracker.alive:
                break
            time.sleep(0.1)
    finally:
        proc.wait(timeout=20)
    present = [e for e in of(events, FdOpened) if e.pid == child and "fixture-leak" in e.target]
    assert present and present[0].how == "present" and present[0].source.pid == parent, present
    leaks = [e for e in of(events, Leak) if e.pid == child and "fixture-leak" in e.target]
    assert {e.kind for e in leaks} == {"possible-fd-after-peer", "possible-held-until-exit"}, leaks
    fixes = [e.fix or close_fix(e.memory) for e in leaks]  # worded where drawn, from its memory
    assert all("mapped" in f and "import" not in f for f in fixes), leaks  # a memfd's fix
    assert not [e for e in of(events, Leak) if e.pid == parent]


#: a child holding the memfd it inherited on fd argv[1], which it closes when told
CLOSER = textwrap.dedent("""
    import os, sys
    fd = int(sys.argv[1])
    print("ready", flush=True)
    for line in sys.stdin:
        os.close(fd)
        print("done", flush=True)
""")


def test_an_fd_closed_between_the_scan_and_kcmp_is_not_kcmp_unavailable():
    shared = os.memfd_create("fixture-closed-mid-scan", 0)
    p = subprocess.Popen(
        [sys.executable, "-c", CLOSER, str(shared)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(shared,),
    )
    try:
        assert p.stdout.readline().strip() == "ready"
        me = os.getpid()
        s = scan([me, p.pid])  # both hold the memfd: kcmp is asked when the shares are worked out
        p.stdin.write("close\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"  # closed after the scan read it
        shares = find_shares(s)
        assert shares.unavailable is None and shares.vanished >= 1
        f = Follower({me, p.pid}, use_nvml=False)
        f.tracker.update(s)  # the same: through the follower, then a poll that sees the close
        f.poll()
        assert not [u for u in f.unseen if "kcmp" in u], f.unseen
    finally:
        p.stdin.close()
        p.wait(timeout=10)
        os.close(shared)


def test_processes_shorter_than_a_poll_are_said_with_the_poll_gap():
    res, events = watch_json("short_lived.py")
    assert res.returncode == 0, res.stderr
    # watch --json keeps stdout for the stream: the command's own lines go to stderr
    said = re.search(r"children ([\d ]+)", res.stderr)
    assert said, res.stderr
    kids = [int(x) for x in said.group(1).split()]
    seen = {e.pid for e in of(events, ProcessSeen)}
    notes = " ".join(n.text for n in of(events, Notice))
    missed = re.search(r"exited before any poll saw them: ([^;]+);", notes)
    assert missed, notes
    for kid in kids:
        assert kid in seen or f"{kid} (exit code 7)" in missed.group(1), (kid, notes)
    assert re.search(r"\d+ polls, at most \d+ ms apart", notes), notes
    assert any("at most" in u for u in of(events, WatchFinished)[-1].unseen)


def test_watch_follows_the_tree_until_its_last_process_exits(monkeypatch):
    """The command exits at once; its child holds the received fd 4.5 s longer, then exits with it
    open: watch is still there to see the exit and the leak."""
    monkeypatch.setenv("FIXTURE_HOLD", "1.5")
    res, events = watch_json("leak_received.py")
    assert res.returncode == 0, res.stderr
    command = min(e.pid for e in of(events, ProcessSeen))
    child = [e.pid for e in of(events, ProcessSeen) if e.pid != command]
    assert child, of(events, ProcessSeen)
    gone = {e.pid for e in of(events, ProcessGone)}
    assert set(child) <= gone, (child, gone)
    assert "possible-held-until-exit" in {e.kind for e in of(events, Leak)}


def test_a_second_interrupt_after_the_command_exited_kills_what_is_left_and_says_whom():
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vmmtui",
            "watch",
            "-q",
            "--",
            "sh",
            "-c",
            "sleep 20 >/dev/null 2>&1 & exit 5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        time.sleep(
            3.0
        )  # the command has exited; its child sleeps on, 20 s at most (ignoring SIGINT: sh's `&`)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)  # passed on to the processes left
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)  # ends the tree: the sleep is SIGKILLed, named
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = re.search(r"killed \(SIGKILL\) 1 process of the command's tree .*: (\d+)", out)
    assert left, out + err
    cmdline = Path(f"/proc/{left.group(1)}/cmdline")
    assert not cmdline.exists() or not cmdline.read_bytes().startswith(b"sleep"), (
        "it outlived watch"
    )
    assert proc.returncode == 5 and "Traceback" not in err, err


#: a child that opens the parent's memfd by path (its own open file of the same inode, as every CUDA
#: process holds /dev/nvidiactl), then receives the parent's fd itself over SCM_RIGHTS when told
RECEIVER = textwrap.dedent("""
    import array, os, socket, sys
    parent, fd, sock = int(sys.argv[1]), int(sys.argv[2]), socket.socket(fileno=int(sys.argv[3]))
    own = os.open(f"/proc/{parent}/fd/{fd}", os.O_RDWR)
    print("ready", own, flush=True)
    sys.stdin.readline()
    fds = array.array("i")
    _, anc, _, _ = sock.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
    fds.frombytes(anc[0][2][: fds.itemsize])
    print("got", fds[0], flush=True)
    sys.stdin.readline()
""")


def test_a_received_fd_arrives_though_the_receiver_held_another_open_file_of_its_inode():
    import array
    import socket
    import time

    mem = os.memfd_create("fixture-same-inode", 0)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    me = os.getpid()
    p = subprocess.Popen(
        [sys.executable, "-c", RECEIVER, str(me), str(mem), str(b.fileno())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(b.fileno(),),
    )
    try:
        assert p.stdout.readline().startswith("ready")
        f = Follower({me, p.pid}, use_nvml=False)
        f.poll()
        time.sleep(0.1)
        f.poll()  # the parent, read first, holds the memfd; the child holds its own open file of it
        a.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [mem]))])
        p.stdin.write("go\n")
        p.stdin.flush()
        got = int(p.stdout.readline().split()[1])
        events = f.poll()
        arrived = [e for e in events if isinstance(e, FdOpened) and e.pid == p.pid and e.fd == got]
        assert arrived and arrived[0].how == "arrived" and arrived[0].source.pid == me, arrived
    finally:
        p.stdin.close()
        p.wait(timeout=10)
        a.close()
        b.close()
        os.close(mem)


def test_a_poll_over_its_cpu_budget_puts_readings_off_and_says_so():
    """Processes that keep running, a budget too small for all: each poll reads those put off last
    time first, the rest keep their last reading (with its times), and the report says how far apart
    a running process was read."""
    import time

    spin = "import os, time\nfds = [os.memfd_create('fixture-budget', 0) for _ in range(50)]\n"
    spin += "while True: time.sleep(0.01)"
    kids = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(4)]
    try:
        time.sleep(1.0)
        f = Follower({k.pid for k in kids}, use_nvml=False, budget=1e-9)
        f.poll()  # a first reading of every process, whatever the budget
        read: dict[int, int] = {}
        for _ in range(8):
            time.sleep(0.05)
            f.poll()
            for pid, p in f.last.processes.items():
                read[pid] = read.get(pid, 0) + p.fresh
                if p.deferred:
                    assert p.fds and p.read_end < f.last.processes[pid].read_end + 1  # kept
        assert f.deferred > 0 and all(read.get(k.pid) for k in kids), read
        said = " ".join(n.text for n in f.missed())
        assert "readings put off" in said and "read at most" in said, said
    finally:
        for k in kids:
            k.kill()
            k.wait()
