"""The full-screen commands on real pseudo-terminals: what they need of the terminal, and the one
exit-status rule (q: the command's own status, Ctrl-C 130, SIGHUP 129, SIGTERM 143)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from terminal import Terminal, alive

from tests.tracing import ebpf_refused


@pytest.mark.parametrize("term", ["dumb", None], ids=["TERM=dumb", "no-TERM"])
@pytest.mark.parametrize(
    "args, instead",
    [(["replay", "cpu-memfd-1mib"], "--html"), (["--backend", "memfd"], "vmmtui run")],
    ids=["replay", "inspector"],
)
def test_a_terminal_that_cannot_draw_a_screen_is_one_line_and_exit_2(tmp_path, term, args, instead):
    """TERM=dumb (or none) drew the first frame and then answered no key, q nor Ctrl-C, at 70 %
    CPU, and outlived its terminal."""
    t = Terminal(tmp_path, *args, term=term)
    try:
        took = t.ended_within(20)
        assert took is not None, t.text[-1500:]
        lines = [line for line in t.text.replace("\r", "").splitlines() if line.strip()]
        assert t.proc.returncode == 2, lines
        said = f"TERM={term}" if term else "TERM is not set"
        assert len(lines) == 1 and said in lines[0] and instead in lines[0], lines
        assert "\x1b[" not in t.output.decode(errors="replace")  # no screen was opened
    finally:
        t.close()


#: how each full-screen command is started, the words that say its screen is up, whether it
#: needs eBPF
SCREENS = {
    "inspector": (("--backend", "memfd", "--size", "1MiB"), "space Next", False),
    "replay": (("replay", "cpu-memfd-1mib"), "REPLAY", False),
    "trace": (("trace", "--", "sleep", "30"), "LIVE · call", True),
    "attach": (("attach", "{pid}"), "LIVE · call", True),
    "attach-poll": (("attach", "--poll", "{pid}"), "LIVE · call", False),
    "watch": (("watch", "--", "sleep", "30"), "LIVE · call", False),
}
#: how the user ends it, and the status that says so (q: the command's own, 0 here: the traced
#: command did not end by itself)
ENDS = {"q": 0, "ctrl-c": 130, "SIGHUP": 129, "SIGTERM": 143}
CASES = [
    ("inspector", "q"),
    ("inspector", "ctrl-c"),
    ("replay", "q"),
    ("replay", "ctrl-c"),
    *[("trace", end) for end in ENDS],
    ("attach", "q"),
    ("attach", "ctrl-c"),
    ("attach", "SIGHUP"),
    ("attach-poll", "ctrl-c"),
    ("attach-poll", "SIGTERM"),
    *[("watch", end) for end in ENDS],
]


@pytest.mark.slow
@pytest.mark.parametrize("screen, end", CASES, ids=[f"{s}-{e}" for s, e in CASES])
@pytest.mark.serial  # its workers gone within 2 s
def test_every_screen_ends_with_one_exit_status_rule(tmp_path, screen, end):
    """q gave 143 in the trace inspector (the command it stopped had died of SIGTERM), so did
    Ctrl-C and SIGHUP; Ctrl-C gave 0 in attach and ``trace -p``."""
    args, ready, needs_ebpf = SCREENS[screen]
    if needs_ebpf and (why := ebpf_refused()):
        pytest.skip(f"eBPF unavailable: {why}")
    target = subprocess.Popen(["sleep", "60"])
    t = Terminal(tmp_path, *[a.format(pid=target.pid) for a in args])
    try:
        t.wait_for(ready, timeout=60)
        time.sleep(0.3)
        started = t.workers()  # the inspector's workers, the traced or watched command
        if end == "q":
            t.press("q")
        elif end == "ctrl-c":
            t.press("\x03")
        else:
            t.proc.send_signal(getattr(signal, end))
        took = t.ended_within(10)
        assert took is not None, t.text[-1500:]
        assert t.proc.returncode == ENDS[end], (t.proc.returncode, t.text[-800:])
        assert "Traceback" not in t.text
        deadline = time.monotonic() + 2.0
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(started) == [], "left running"
    finally:
        t.close()
        target.kill()
        target.wait()


@pytest.mark.slow
@pytest.mark.parametrize("screen", ["trace", "watch"])
def test_q_after_the_traced_command_ended_gives_its_status(tmp_path, screen):
    if screen == "trace" and (why := ebpf_refused()):
        pytest.skip(f"eBPF unavailable: {why}")
    t = Terminal(tmp_path, screen, "--", "sh", "-c", "sleep 1; exit 3")
    try:
        t.wait_for("the command ended", timeout=60)
        t.press("q")
        assert t.ended_within(10) is not None, t.text[-1500:]
        assert t.proc.returncode == 3, t.text[-800:]
    finally:
        t.close()


def test_the_gallery_list_fits_an_80_column_terminal_at_spaces(tmp_path):
    """On a terminal of 80 columns the list's lines were cut mid-word by the terminal."""
    t = Terminal(tmp_path, "replay", "--list", width=80)
    try:
        assert t.ended_within(20) is not None and t.proc.returncode == 0
        lines = t.text.replace("\r", "").splitlines()
        assert lines and max(len(line) for line in lines) <= 80
        piped = subprocess.run(
            [sys.executable, "-m", "vmmtui", "replay", "--list"], capture_output=True, text=True
        ).stdout
        assert " ".join(t.text.split()) == " ".join(piped.split())  # the same words, none cut
        assert max(len(line) for line in piped.splitlines()) > 80  # a pipe: one line each
    finally:
        t.close()
