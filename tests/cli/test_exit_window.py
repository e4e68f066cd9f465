"""A stop signal that comes after the command has finished and said so (while the interpreter shuts
down) ends the process with the command's own status, never as "killed by SIGTERM"."""

import subprocess
import sys

import pytest

AFTER_MAIN = """
import os, signal, sys, time
import vmmtui.__main__ as m
m.ended_with(7)                       # as run() does once main() returned 7
os.kill(os.getpid(), signal.{sig})
time.sleep(5)                         # never reached: the handler ends the process
sys.exit(0)
"""

AT_SHUTDOWN = """
import atexit, os, signal, sys
import vmmtui.__main__ as m
m.ended_with(3)
atexit.register(m.hold_stop_signals)  # as run() registers it, first: it runs last
sys.exit(3)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="no POSIX signals")
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_after_the_command_ended_keeps_its_status(sig):
    done = subprocess.run(
        [sys.executable, "-c", AFTER_MAIN.format(sig=sig)], capture_output=True, timeout=30
    )
    assert done.returncode == 7, done.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="no POSIX signals")
def test_the_last_exit_handler_holds_the_stop_signals():
    """After it, the interpreter's own shutdown cannot be cut by a stop signal: one sent then (here
    from a finaliser that runs after every exit handler) dies with the process."""
    code = AT_SHUTDOWN.replace(
        "sys.exit(3)",
        "class Late:\n    def __del__(self):\n        os.kill(os.getpid(), signal.SIGTERM)\n"
        "late = Late()\nsys.exit(3)",
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=30)
    assert done.returncode == 3, (done.returncode, done.stderr)
