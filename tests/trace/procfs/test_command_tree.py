"""The command that ``trace -- CMD`` and ``watch -- CMD`` start never outlives vmmtui: kill -9 of
vmmtui (at several moments, SIGSTOPped first too) leaves no process of the command's tree, orphans
that left their session included; a command that ignores SIGINT and SIGTERM is SIGKILLed after a
short grace; a mistyped command is refused in one line before any screen opens.

Real processes; every process of the tree carries a marker in its argv, looked for in /proc."""

import os
import pty
import secrets
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vmmtui.trace.command import MARK, Command, CommandNotFound, marked, resolve

ROOT = Path(__file__).resolve().parents[3]

#: serial: kills timed to the moment and a grace of under 4 s
pytestmark = pytest.mark.serial

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

#: a command with a tree: a child, and a grandchild orphaned at once into a session of its own
#: (its parent exits: re-parented away from the tree), every one 300 s long unless ended: three
#: processes once it has settled (``SETTLED``)
TREE = """
import os, signal, sys, time
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        time.sleep(300)
    os._exit(0)
if os.fork() == 0:
    time.sleep(300)
time.sleep(300)
"""

SETTLED = 3


def needs_ebpf(args: list[str], request: pytest.FixtureRequest) -> None:
    """``trace``'s cases load the probe: the ``ebpf`` fixture skips them where it cannot."""
    if args[0] == "trace":
        request.getfixturevalue("ebpf")


def with_marker(marker: str, but: int = 0) -> list[str]:
    """The pids whose command line carries ``marker`` (the tree's every process; vmmtui's own,
    ``but``, carries it too: its argv holds the command)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
        except (OSError, IndexError):
            continue
        if marker.encode() in argv and not zombie and int(entry) != but:
            out.append(entry)
    return out


def wait_for(pred, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.02)
    return pred()


def start(args: list[str], marker: str, deaf: bool = False) -> subprocess.Popen:
    cmd = [sys.executable, "-c", TREE, marker, "deaf" if deaf else "hears"]
    return subprocess.Popen(
        [sys.executable, "-m", "vmmtui", *args, "--", *cmd],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
    )


def clean_up(proc: subprocess.Popen, marker: str) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for pid in with_marker(marker):  # only if the test failed: never leave them running
        os.kill(int(pid), signal.SIGKILL)


# -- the mistyped command ---------------------------------------------------------------------------
@pytest.mark.parametrize("alias", ["trace", "watch"])
def test_a_mistyped_command_is_refused_in_one_line_before_any_screen_opens(alias):
    """In a terminal (a pty), where the inspector would open: no screen, one line, exit 127."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs at once
        os.execve(
            sys.executable,
            [sys.executable, "-m", "vmmtui", alias, "--", "nosuchcmd-vmmtui"],
            ENV,
        )
    out = b""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 127, out
    assert out.decode().strip() == f"vmmtui {alias}: command not found: nosuchcmd-vmmtui", out
    assert b"\x1b[" not in out  # no screen was drawn


def test_resolve_says_not_found_and_not_executable_as_a_shell_does(tmp_path):
    with pytest.raises(CommandNotFound) as e:
        resolve(["nosuchcmd-vmmtui"])
    assert e.value.code == 127
    plain = tmp_path / "plain"
    plain.write_text("")
    with pytest.raises(CommandNotFound) as e:
        resolve([str(plain)])
    assert e.value.code == 126 and "not executable" in str(e.value)
    with pytest.raises(CommandNotFound) as e:
        resolve(["bad\x1b]0;x\x07name"])
    assert "\x1b" not in str(e.value) and "\\x1b" in str(e.value)
    assert resolve(["sh"]).endswith("/sh")


# -- one Command in this process ----------------------------------------------------------------------
def test_the_tree_carries_the_mark_and_stop_ends_it_orphans_included():
    marker = f"vmmtui-test-{secrets.token_hex(4)}"
    cmd = Command([sys.executable, "-c", TREE, marker, "hears"])
    cmd.start()
    try:
        assert wait_for(lambda: len(with_marker(marker)) == SETTLED, 10), with_marker(marker)
        assert {str(p) for p in marked(cmd.token)} == set(with_marker(marker))
        env = Path(f"/proc/{cmd.pid}/environ").read_bytes().split(b"\0")
        assert f"{MARK}={cmd.token}".encode() in env
        assert cmd.stop()  # SIGTERM: they do not ignore it
        assert wait_for(lambda: not with_marker(marker), 3), with_marker(marker)
    finally:
        cmd.close()
        for pid in with_marker(marker):
            os.kill(int(pid), signal.SIGKILL)


@pytest.mark.slow
def test_a_stop_signal_the_tree_ignores_becomes_sigkill_after_the_grace():
    from vmmtui.trace.command import SIGNAL_GRACE_S

    marker = f"vmmtui-test-{secrets.token_hex(4)}"
    cmd = Command([sys.executable, "-c", TREE, marker, "deaf"])
    cmd.start()
    try:
        assert wait_for(lambda: len(with_marker(marker)) == SETTLED, 10), with_marker(marker)
        cmd.forward(signal.SIGINT)
        assert not cmd.enforce()  # within the grace: nothing killed
        assert len(with_marker(marker)) == SETTLED
        time.sleep(SIGNAL_GRACE_S)
        assert len(cmd.enforce()) == SETTLED
        assert wait_for(lambda: not with_marker(marker), 3), with_marker(marker)
    finally:
        cmd.close()
        for pid in with_marker(marker):
            os.kill(int(pid), signal.SIGKILL)


# -- kill -9 of vmmtui ---------------------------------------------------------------------------------
MOMENTS = [
    pytest.param(["trace", "--text"], "running", False, id="trace-text"),
    pytest.param(["trace", "--json"], "running", False, id="trace-json"),
    pytest.param(["trace", "--text"], "running", True, id="trace-stopped"),
    pytest.param(["trace", "--text"], "starting", False, id="trace-starting"),
    pytest.param(["watch", "-q"], "running", False, id="watch"),
    pytest.param(["watch", "-q"], "running", True, id="watch-stopped"),
    pytest.param(["watch", "-q"], "starting", False, id="watch-starting"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args,moment,sigstop", MOMENTS)
def test_kill_9_of_vmmtui_leaves_no_process_of_the_command_tree(args, moment, sigstop, request):
    """``starting``: killed the moment the command's first process exists (the probes may still
    be loading); ``running``: once the whole tree runs; ``sigstop``: SIGSTOP, then SIGKILL."""
    needs_ebpf(args, request)
    marker = f"vmmtui-test-{secrets.token_hex(4)}"
    proc = start(args, marker)
    try:
        want = 1 if moment == "starting" else SETTLED
        assert wait_for(lambda: len(with_marker(marker, proc.pid)) >= want, 30), proc.stderr
        if sigstop:
            proc.send_signal(signal.SIGSTOP)
        proc.kill()
        proc.wait()
        assert wait_for(lambda: not with_marker(marker), 3), with_marker(marker)
    finally:
        clean_up(proc, marker)


@pytest.mark.slow
@pytest.mark.parametrize("args", [pytest.param(["trace", "--text"]), ["watch", "-q"]])
def test_a_command_that_ignores_sigint_and_sigterm_is_killed_after_a_short_grace(args, request):
    needs_ebpf(args, request)
    marker = f"vmmtui-test-{secrets.token_hex(4)}"
    proc = start(args, marker, deaf=True)
    try:
        assert wait_for(lambda: len(with_marker(marker, proc.pid)) == SETTLED, 30), proc.stderr
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        took = time.monotonic() - t0
        assert proc.returncode == 128 + signal.SIGKILL, proc.stderr.read()
        assert took < 4, took
        assert not with_marker(marker, proc.pid)
    finally:
        clean_up(proc, marker)
