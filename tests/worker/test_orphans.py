"""Nothing outlives a killed parent: no worker, no shared memory, no socket file, no session directory.

A throw-away parent process stands in for the session: it makes the private ``vmmtui-<pid>-*``
directory, launches a producer and a consumer on memfd with control socketpairs, drives them to a
step, says who is who, and waits to be killed with SIGKILL (workers stopped with SIGSTOP or not).
"""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from vmmtui.plan.steps import build_plan

#: the slow tier: left out of the default run (README), run by .ci/run after it
#: serial: nothing left within 2 s of a kill -9
pytestmark = [pytest.mark.slow, pytest.mark.serial]

PARENT = r"""
import json, os, socket, subprocess, sys, tempfile, time
from vmmtui.plan.config import WorkerConfig
from vmmtui.wire.protocol import LineChannel, decode_report
from vmmtui.plan.steps import build_plan

base, upto = sys.argv[1], int(sys.argv[2])
directory = tempfile.mkdtemp(prefix=f"vmmtui-{os.getpid()}-", dir=base)
path = os.path.join(directory, "vmmtui.sock")
workers = {}
for role in ("producer", "consumer"):
    parent, child = socket.socketpair()
    cfg = WorkerConfig(role, "memfd", 1 << 20, path, control_fd=child.fileno())
    proc = subprocess.Popen([sys.executable, "-m", "vmmtui.worker", *cfg.to_argv()], pass_fds=(child.fileno(),),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    child.close()
    ch = LineChannel(parent)
    assert ch.receive(timeout=30)["type"] == "hello"
    workers[role] = (proc, ch)
pids = {role: proc.pid for role, (proc, _) in workers.items()}
for role, step in build_plan()[:upto]:
    args = {"expect_pid": pids["consumer" if role == "producer" else "producer"]} if step in ("accept", "connect") else {}
    _, ch = workers[role]
    ch.send({"cmd": "step", "step": step, "args": args})
    report = decode_report(ch.receive(timeout=30)["report"])
    assert report.ok, report.failure
print(json.dumps({"dir": directory, **pids}), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ours(directory: str) -> list[psutil.Process]:
    """Every live process started for this directory (workers and the producer's reaper)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if (
                any(directory in arg for arg in p.info["cmdline"] or [])
                and p.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except psutil.Error:
            pass
    return found


def memfd_holders(pids) -> list[int]:
    held = []
    for pid in pids:
        try:
            if any(
                os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:vmmtui-alloc")
                for fd in os.listdir(f"/proc/{pid}/fd")
            ):
                held.append(pid)
        except OSError:
            pass
    return held


PLAN = build_plan()
#: (steps done, which worker is stopped when the parent dies): every step of the plan, each with
#: the producer, the consumer or neither stopped in turn, and both stopped once memory is shared
CASES = [(i, ("none", "producer", "consumer")[i % 3]) for i in range(1, len(PLAN))] + [(17, "both")]


@pytest.mark.parametrize(
    "upto, stopped",
    CASES,
    ids=[f"{i}-{PLAN[i - 1][0]}-{PLAN[i - 1][1]}-stop-{s}" for i, s in CASES],
)
def test_kill_9_of_the_parent_leaves_nothing_within_2_s(tmp_path, upto, stopped):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path), str(upto)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        line = parent.stdout.readline()
        assert line, "the stand-in session failed"
        info = json.loads(line)
        pids = [info["producer"], info["consumer"]]
        assert os.path.isdir(info["dir"])
        for role in ("producer", "consumer"):
            if stopped in (role, "both"):
                os.kill(info[role], signal.SIGSTOP)
                while psutil.Process(info[role]).status() != psutil.STATUS_STOPPED:
                    time.sleep(0.005)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and (
            any(map(alive, pids)) or ours(info["dir"]) or os.path.exists(info["dir"])
        ):
            time.sleep(0.02)
        assert not [p for p in pids if alive(p)], "a worker outlived its parent"
        assert not memfd_holders(pids), "shared memory outlived the parent"
        assert not ours(info["dir"]), f"left running: {ours(info['dir'])}"
        assert not os.path.exists(info["dir"]), f"left behind: {os.listdir(info['dir'])}"
        assert os.listdir(tmp_path) == []
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        for p in ours(str(tmp_path)):
            p.kill()


def test_the_reaper_holds_nothing_and_leaves_a_live_sessions_directory(tmp_path):
    """While the session lives the directory is the session's: a producer's normal end only takes its socket."""
    import socket

    from vmmtui.plan.config import WorkerConfig
    from vmmtui.wire.protocol import LineChannel, decode_hello

    directory = tmp_path / f"vmmtui-{os.getpid()}-x"
    directory.mkdir()
    path = str(directory / "vmmtui.sock")
    parent, child = socket.socketpair()
    cfg = WorkerConfig("producer", "memfd", 65536, path, control_fd=child.fileno())
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui.worker", *cfg.to_argv()],
        pass_fds=(child.fileno(),),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    child.close()
    ch = LineChannel(parent)
    try:
        decode_hello(ch.receive(timeout=30))
        for step in (
            "init",
            "query",
            "create",
            "reserve",
            "map",
            "set_access",
            "fill",
            "export",
            "listen",
        ):
            ch.send({"cmd": "step", "step": step})
            assert ch.receive(timeout=30)["report"]["ok"]
        reapers = psutil.Process(proc.pid).children()
        assert len(reapers) == 1
        targets = sorted(
            os.readlink(f"/proc/{reapers[0].pid}/fd/{fd}")
            for fd in os.listdir(f"/proc/{reapers[0].pid}/fd")
        )
        assert not [t for t in targets if "memfd" in t or "socket" in t], (
            targets
        )  # no memory, no channel
        proc.send_signal(signal.SIGKILL)  # killed by its session, which lives on
        proc.wait()
        reapers[0].wait(3)
        assert not os.path.exists(path)  # nobody listens on it any more: the reaper took it
        assert directory.is_dir()  # the session's to remove
    finally:
        proc.kill()
        proc.wait()
        ch.close()


def first_worker(cli: subprocess.Popen, timeout: float = 60) -> int:
    """The pid of the first worker the CLI starts, as soon as it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            for child in psutil.Process(cli.pid).children():
                if "vmmtui.worker" in " ".join(child.cmdline()):
                    return child.pid
        except psutil.Error:
            pass
        assert cli.poll() is None, "the CLI ended before it started a worker"
        time.sleep(0.002)
    raise AssertionError("no worker within 60 s")


def kill_the_cli_after_its_first_worker(tmp_path, delay: float) -> None:
    """``vmmtui run`` killed with SIGKILL ``delay`` s after its first worker appears: soon after
    no worker, no reaper, no session directory and no log is left in its TMPDIR (within 2 s on an
    idle machine; 5 s are allowed, for a worker whose start-up a loaded machine delays)."""
    cli = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "run", "--backend", "memfd"],
        env=dict(os.environ, TMPDIR=str(tmp_path)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        first_worker(cli)
        time.sleep(delay)
        cli.kill()
        cli.wait()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (ours(str(tmp_path)) or os.listdir(tmp_path)):
            time.sleep(0.02)
        assert not ours(str(tmp_path)), f"left running: {ours(str(tmp_path))}"
        assert os.listdir(tmp_path) == [], f"left behind {delay:.3f} s in: {os.listdir(tmp_path)}"
    finally:
        cli.kill()
        cli.wait()
        for p in ours(str(tmp_path)):
            p.kill()


#: 0 to 0.3 s after the first worker appears, in even steps: the workers' start-up, hello and the
#: first steps (before this round 23 of 23 such kills left the directory for good)
DELAYS = [0.3 * i / 7 for i in range(8)]


@pytest.mark.parametrize("delay", DELAYS, ids=[f"{d:.3f}s" for d in DELAYS])
def test_a_cli_killed_right_after_it_spawned_its_workers_leaves_nothing(tmp_path, delay):
    kill_the_cli_after_its_first_worker(tmp_path, delay)


@pytest.mark.soak
def test_a_cli_killed_right_after_spawn_100_times_leaves_nothing(tmp_path):
    import random

    rng = random.Random(19)
    for i in range(100):
        run_dir = tmp_path / str(i)
        run_dir.mkdir()
        kill_the_cli_after_its_first_worker(run_dir, rng.uniform(0, 0.3))


KILLED_AT_MKDIR = r"""
import os, signal, sys
from vmmtui.plan.config import SessionConfig
from vmmtui.session import loop

made = loop.make_private_dir

def make_and_die(*args):
    result = made(*args)
    os.kill(os.getpid(), signal.SIGKILL)  # the session dies the moment its directory exists
    return result

loop.make_private_dir = make_and_die
loop.Session(SessionConfig(backend="memfd", tmpdir=sys.argv[1])).start()
"""


def test_a_session_killed_the_moment_its_directory_exists_leaves_nothing(tmp_path):
    """The CLI's own window: the directory is made only once the producer (and its reaper) runs."""
    cli = subprocess.run(
        [sys.executable, "-c", KILLED_AT_MKDIR, str(tmp_path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert cli.returncode == -signal.SIGKILL, cli.stderr.decode()
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and (ours(str(tmp_path)) or os.listdir(tmp_path)):
        time.sleep(0.02)
    assert not ours(str(tmp_path)), f"left running: {ours(str(tmp_path))}"
    assert os.listdir(tmp_path) == [], f"left behind: {os.listdir(tmp_path)}"
