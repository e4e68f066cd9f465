"""A stop signal ends every command that writes a stream promptly even when its stdout is a pipe
nobody reads (`vmmtui run --json | sleep 1000`): once the pipe is full the command waits in
write(); SIGINT, SIGTERM and SIGHUP must still end it within seconds, with its usual words on
stderr, exit 128 + signal (a traced command's own status for `trace -- CMD`), no process and no
socket directory left behind."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest

#: serial: every process gone within 5 s of the signal; attach --all
pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="pipes, /proc and signals"),
    pytest.mark.serial,
]

#: Linux's F_SETPIPE_SZ: the pipe made as small as it goes (one page) fills with the first lines
F_SETPIPE_SZ = 1031
#: how long a command may take to end after the signal (it ends in about a second; the machine
#: that runs the tests may be busy)
ENDS_WITHIN_S = 15
SIGNALS = [pytest.param(s, id=s.name) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
#: the quick ones: SIGTERM in the default run, the other two in the slow tier
SIGTERM_FIRST = [
    pytest.param(s, id=s.name, marks=[] if s == signal.SIGTERM else [pytest.mark.slow])
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
]
#: a program that makes and closes a memfd without end: events for a trace or a poll, a line each
CHURN = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"  # Ctrl-C ends it without a traceback
    "fds = []\n"
    "while True:\n"
    "    fds.append(os.memfd_create('churn'))\n"
    "    if len(fds) > 4:\n"
    "        os.close(fds.pop(0))\n"
    "    time.sleep(0.02)\n"
)


def unread(tmp_path, *argv: str, filled: int = 0) -> tuple[subprocess.Popen, int]:
    """``vmmtui ARGV`` with stdout a one-page pipe whose read end is kept open and never read
    (``filled``: with that many bytes in it already); stderr is read (by ``stopped``). Its own
    process group, as a shell's job."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    os.write(write_end, b"-" * filled)
    # as a user runs it: stdout block-buffered (no PYTHONUNBUFFERED), and following its workers
    # with eBPF where that loads
    environ = {
        k: v for k, v in os.environ.items() if k not in ("VMMTUI_NO_EBPF", "PYTHONUNBUFFERED")
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", *argv],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(environ, TMPDIR=str(tmp_path)),
        start_new_session=True,
    )
    os.close(write_end)
    return proc, read_end


def wait_in_write(proc: subprocess.Popen, waits_in: str = "pipe_write") -> None:
    """Until the command's main thread waits in a write to the full pipe (the kernel's wchan)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"ended ({proc.returncode}) before its output filled the pipe")
        try:
            with open(f"/proc/{proc.pid}/wchan") as f:
                if waits_in in f.read():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    pytest.fail("its output never filled the pipe")


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def stopped(
    proc: subprocess.Popen, read_end: int, signum: int, waits_in: str = "pipe_write"
) -> str:
    """Sends ``signum`` (SIGINT to the group, as Ctrl-C) to a command waiting in its write; its
    stderr once it ended, within ``ENDS_WITHIN_S``, with nothing of it left running."""
    wait_in_write(proc, waits_in)
    family = descendants(proc.pid)
    if signum == signal.SIGINT:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    try:
        _, err = proc.communicate(timeout=ENDS_WITHIN_S)
    except subprocess.TimeoutExpired:
        with open(f"/proc/{proc.pid}/wchan") as f:
            waits = f.read()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(
            f"still running {ENDS_WITHIN_S} s after {signal.Signals(signum).name} ({waits})"
        )
    finally:
        os.close(read_end)
    deadline = time.monotonic() + 5
    while (alive := [p for p in family if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive, f"left running: {alive}"
    assert "Traceback" not in err, err
    return err


def running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("signum", SIGTERM_FIRST)
def test_replay_text_into_a_pipe_nobody_reads(tmp_path, signum):
    proc, read_end = unread(tmp_path, "replay", "h100-trace-torch-expandable", "--text")
    err = stopped(proc, read_end, signum)
    assert proc.returncode == 128 + signum
    assert err == "vmmtui: interrupted; nothing was left running\n"


@pytest.mark.parametrize("argv", [["replay", "--list"], ["--help"]], ids=["listing", "help"])
@pytest.mark.parametrize("signum", SIGTERM_FIRST)
def test_the_last_lines_into_a_pipe_nobody_reads(tmp_path, signum, argv):
    """The gallery's listing, or the help, is still in Python's buffer when the command returns:
    the write that waits is its last flush, which must come while a stop signal still ends the
    command (the interpreter's own flush at exit holds them)."""
    proc, read_end = unread(tmp_path, *argv, filled=4000)
    err = stopped(proc, read_end, signum)
    assert proc.returncode == 128 + signum
    assert err == "vmmtui: interrupted; nothing was left running\n"


@pytest.mark.slow
@pytest.mark.parametrize("json", [True, False], ids=["json", "text"])
@pytest.mark.parametrize("signum", SIGNALS)
def test_run_into_a_pipe_nobody_reads(tmp_path, signum, json):
    """The workers are stopped and the socket directory removed, though the cleanup's events are
    for a reader that does not read."""
    proc, read_end = unread(
        tmp_path, "run", "--backend", "memfd", "--consumers", "3", *(["--json"] if json else [])
    )
    err = stopped(proc, read_end, signum)
    assert proc.returncode == 128 + signum, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmmtui: interrupted"), err
    assert lines[0].endswith("workers stopped, everything cleaned up"), err
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--json", "--text"])
@pytest.mark.parametrize("signum", SIGNALS)
def test_trace_of_a_command_into_a_pipe_nobody_reads(ebpf, tmp_path, signum, how):
    """The signal goes on to the command, which it ends: the trace exits with the command's status
    (128 + the signal), and says nothing more than it says with a reader."""
    proc, read_end = unread(tmp_path, "trace", "--no-cuda", how, "--", sys.executable, "-c", CHURN)
    err = stopped(proc, read_end, signum)
    assert proc.returncode == 128 + signum, err
    assert err == "", err


@pytest.mark.slow
@pytest.mark.parametrize("how", ["--json", "--text"])
@pytest.mark.parametrize("signum", SIGNALS)
def test_watch_into_a_pipe_nobody_reads(tmp_path, signum, how):
    proc, read_end = unread(tmp_path, "watch", "--no-nvml", how, "--", sys.executable, "-c", CHURN)
    err = stopped(proc, read_end, signum)
    assert proc.returncode == 128 + signum, err
    assert err == "", err


@pytest.mark.slow
@pytest.mark.parametrize(
    "how", [["--poll", "PID"], ["PID"], ["--all"]], ids=["pid-polling", "pid-eBPF", "all"]
)
@pytest.mark.parametrize("signum", SIGNALS)
def test_attach_into_a_pipe_nobody_reads(request, tmp_path, signum, how):
    """``attach PID`` follows a process it did not start (polling or with eBPF), ``attach --all``
    (the node agent, polling) every one that holds shared memory: what they follow is left
    running; the exit is 128 + the signal."""
    if how == ["PID"]:
        request.getfixturevalue("ebpf")
    target = subprocess.Popen([sys.executable, "-c", CHURN])
    try:
        argv = [str(target.pid) if a == "PID" else a for a in how]
        proc, read_end = unread(tmp_path, "attach", "--no-nvml", "--text", *argv)
        err = stopped(proc, read_end, signum)
        assert proc.returncode == 128 + signum, err
        assert target.poll() is None  # not ours to end
    finally:
        target.kill()
        target.wait()


@pytest.mark.slow
def test_a_reader_that_reads_after_the_signal_gets_every_line(tmp_path):
    """The relay drops only what the reader does not take: one that reads once the signal came
    gets the rest of the stream whole, the session's close included."""
    proc, read_end = unread(tmp_path, "run", "--backend", "memfd", "--json")
    wait_in_write(proc)
    proc.send_signal(signal.SIGTERM)
    with os.fdopen(read_end, "rb") as reader:  # reads to the end: the command's exit closes it
        out = reader.read().decode()
    _, err = proc.communicate(timeout=ENDS_WITHIN_S)
    assert proc.returncode == 128 + signal.SIGTERM, err
    lines = out.splitlines()
    assert all(line.startswith('{"v":1,') and line.endswith("}") for line in lines), lines
    assert '"event":"SessionClosed","clean":true' in lines[-1], lines[-1]


@pytest.mark.parametrize("signum", SIGTERM_FIRST)
def test_a_socket_nobody_reads(tmp_path, signum):
    """stdout a stream socket (as a service manager's log) whose reader does not read."""
    ours, theirs = socket.socketpair()
    for s in (ours, theirs):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "replay", "h100-trace-torch-expandable", "--text"],
        stdout=theirs.fileno(),
        stderr=subprocess.PIPE,
        text=True,
        env=dict(environ, TMPDIR=str(tmp_path)),
        start_new_session=True,
    )
    theirs.close()
    try:
        err = stopped(proc, os.dup(ours.fileno()), signum, waits_in="sock_")
    finally:
        ours.close()
    assert proc.returncode == 128 + signum
    assert err == "vmmtui: interrupted; nothing was left running\n"
