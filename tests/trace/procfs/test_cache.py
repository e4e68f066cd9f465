"""What a scan carries over from the last one must never hide a change: real processes change their
fds between two polls and the next poll must see it (fd reopened onto another file of the same name,
an fd swapped for another open file of the same inode), while a process that did not run is carried."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from vmmtui.stream.events import FdClosed, FdOpened
from vmmtui.trace.procfs.follow import Follower
from vmmtui.trace.procfs.scan import scan
from vmmtui.trace.procfs.shares import find_shares

#: a child that holds memfd "same" on fd 5 (and the parent's memfd on fd argv[1]) and does what it is told
CHILD = textwrap.dedent("""
    import os, sys
    shared = int(sys.argv[1]) if len(sys.argv) > 1 else None
    os.dup2(os.memfd_create("same"), 5)
    print("ready", flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "same-name":  # close fd 5, open another memfd of the same name onto fd 5
            new = os.memfd_create("same")
            os.close(5)
            os.dup2(new, 5)
            os.close(new)
        elif cmd == "same-inode":  # the shared memfd, reopened onto its fd: a new open file description
            new = os.open(f"/proc/self/fd/{shared}", os.O_RDWR)
            os.dup2(new, shared)
            os.close(new)
        print("done", flush=True)
""")


def child(shared: int | None = None) -> subprocess.Popen:
    extra = [str(shared)] if shared is not None else []
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        pass_fds=(shared,) if shared is not None else (),
    )
    assert p.stdout.readline().strip() == "ready"
    return p


def ask(p: subprocess.Popen, cmd: str) -> None:
    p.stdin.write(cmd + "\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "done"


def asleep(pid: int) -> None:
    """Until ``pid`` sleeps (blocked in read): a running process is never carried over."""
    for _ in range(200):
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "S":
                return
        time.sleep(0.01)
    raise AssertionError(f"pid {pid} never slept")


def stop(p: subprocess.Popen) -> None:
    p.stdin.close()
    p.wait(timeout=10)


def test_an_idle_process_is_carried_and_one_that_ran_is_read_again():
    p = child()
    try:
        asleep(p.pid)
        first = scan([p.pid], refresh_polls=10**9)
        second = scan([p.pid], prev=first, refresh_polls=10**9)
        assert not second.processes[
            p.pid
        ].fresh  # it sat in read(): nothing of its fds can have changed
        assert second.processes[p.pid].fds is first.processes[p.pid].fds
        ask(p, "nothing")
        asleep(p.pid)
        third = scan([p.pid], prev=second, refresh_polls=10**9)
        assert third.processes[p.pid].fresh
    finally:
        stop(p)


def test_fd_closed_and_reopened_onto_another_file_of_the_same_name_is_seen():
    p = child()
    try:
        f = Follower({p.pid}, use_nvml=False)
        f.poll()
        before = f.last.processes[p.pid].fds[5]
        assert before.target.startswith("/memfd:same")
        ask(p, "same-name")
        events = f.poll()
        after = f.last.processes[p.pid].fds[5]
        assert (
            after.target == before.target and after.ino != before.ino
        )  # the name alone would hide it
        assert [e for e in events if isinstance(e, FdClosed) and e.pid == p.pid and e.fd == 5]
        assert [e for e in events if isinstance(e, FdOpened) and e.pid == p.pid and e.fd == 5]
    finally:
        stop(p)


def test_an_fd_swapped_for_another_open_file_of_the_same_inode_is_no_longer_shared():
    mine = os.memfd_create("shared-then-not")
    os.ftruncate(mine, 4096)
    p = child(mine)
    try:
        me = os.getpid()
        s1 = scan([me, p.pid])
        sh1 = find_shares(s1)
        assert (me, mine) in sh1.same_as(p.pid, mine)
        ask(p, "same-inode")  # same (dev, ino), same name, same fd number: only kcmp tells
        s2 = scan([me, p.pid], prev=s1)
        sh2 = find_shares(s2, sh1)
        assert s2.processes[p.pid].fds[mine].key == s1.processes[p.pid].fds[mine].key
        assert sh2.same_as(p.pid, mine) == []
        fresh = find_shares(scan([me, p.pid]))  # the carried answer is the one from scratch
        assert sorted(sh2.runs) == sorted(fresh.runs)
        assert {(f.dev, f.ino, f.same_description) for f in sh2.files} == {
            (f.dev, f.ino, f.same_description) for f in fresh.files
        }
    finally:
        stop(p)
        os.close(mine)


def test_carried_kcmp_groups_match_a_scan_from_scratch_as_fds_come_and_go():
    mine = os.memfd_create("group")
    p, q = child(mine), child(mine)
    try:
        me = os.getpid()
        s = scan([me, p.pid, q.pid])
        sh = find_shares(s)
        for proc, cmd in ((p, "same-inode"), (q, "nothing"), (q, "same-inode"), (p, "same-name")):
            ask(proc, cmd)
            extra = os.dup(mine)  # this process changes too: a new holder to insert
            s = scan([me, p.pid, q.pid], prev=s)
            sh = find_shares(s, sh)
            fresh = find_shares(scan([me, p.pid, q.pid]))
            assert {h: sorted(r) for h, r in sh.runs.items()} == {
                h: sorted(r) for h, r in fresh.runs.items()
            }
            os.close(extra)
    finally:
        stop(p)
        stop(q)
        os.close(mine)
