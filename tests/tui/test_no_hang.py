"""On a real pseudo-terminal: a replay autoplaying at the fastest pace answers q, SIGTERM, SIGHUP
and a closed terminal, and says it stopped no workers; a full-screen command whose stdin is not a
terminal (< /dev/null) says so and exits 2 at once instead of spinning at full CPU."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios

import pytest
from terminal import ANSI, Terminal, _winsize

#: serial: each way out ends the app within 4 s
pytestmark = [pytest.mark.slow, pytest.mark.serial]

FASTEST = ("replay", "h100-vmm-1mib", "--autoplay", "--pace", "0.01")
#: a loaded 2-core machine gets some slack over the 2 s promised
LIMIT_S = 4.0


@pytest.mark.parametrize("how", ["q", "TERM", "HUP", "closed"])
def test_a_replay_at_the_fastest_pace_ends_on_every_way_of_asking(tmp_path, how):
    term = Terminal(tmp_path, *FASTEST, width=160, height=48)
    try:
        term.wait_for("REPLAY")
        if how == "q":
            term.press("q")
        elif how == "closed":  # tmux kill-session, a closed window: the kernel hangs up
            term.close_terminal()
        else:
            term.proc.send_signal(getattr(signal, f"SIG{how}"))
        took = term.ended_within(LIMIT_S)
        assert took is not None, f"still running after {LIMIT_S} s: {term.text[-1500:]!r}"
        tail = term.text[-2000:]
        assert "Traceback" not in tail
        if how in ("TERM", "HUP"):
            assert term.proc.returncode == 128 + getattr(signal, f"SIG{how}")
            assert f"interrupted by SIG{how}; the replay closed" in tail
            assert "workers were stopped" not in tail  # a replay has none
        elif how == "q":
            assert term.proc.returncode == 0
    finally:
        term.close()


@pytest.mark.parametrize(
    "args", [["replay", "cpu-memfd-1mib"], ["--backend", "memfd"]], ids=["replay", "inspector"]
)
def test_stdin_not_a_terminal_is_one_line_and_exit_2(tmp_path, args):
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, _winsize(40, 120))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "vmmtui", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            cwd=tmp_path,
            timeout=60,  # the old way spun at full CPU for ever
        )
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    text = ANSI.sub("", out.decode(errors="replace")).strip()
    assert proc.returncode == 2 and "stdin is not one" in text, text[-1500:]
    assert len(text.splitlines()) == 1, text[-1500:]
