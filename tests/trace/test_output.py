"""The traced command's own output is kept, never thrown away: a real program's stdout (through a
pseudo-terminal, so lines come as written) and stderr (a traceback too), bounded in memory with
what was dropped counted, and nothing of the capture left open afterwards."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.tracing import vmmtui_trace
from vmmtui.trace.command import Command
from vmmtui.trace.output import STDERR, STDOUT, Chunk, Kept, Output

TALKS = str(Path(__file__).resolve().parents[1] / "fixtures" / "talks.py")


def fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def run(*args: str, keep: int = 1 << 18) -> tuple[Output, Command]:
    output = Output(keep=keep)
    cmd = Command([sys.executable, TALKS, *args], stdout=output)
    cmd.start()
    assert cmd.proc is not None
    cmd.proc.wait(20)
    cmd.close()
    return output, cmd


def test_stdout_and_a_traceback_on_stderr_are_kept_in_order():
    before = fds()
    output, cmd = run("--raise")
    kept = output.kept()
    assert cmd.proc is not None and cmd.proc.returncode == 1
    lines = kept.lines()
    assert (STDOUT, "talks: hello on stdout") in lines
    assert (STDERR, "talks: a warning on stderr") in lines
    err = kept.text(STDERR)
    assert "Traceback (most recent call last):" in err
    assert "RuntimeError: talks: something went wrong" in err
    assert "talks: bye" not in kept.text()
    assert kept.ended and kept.dropped == 0 and kept.total == len(kept.text().encode())
    assert "\r" not in kept.text(STDOUT)  # the pty's ONLCR is off: the program's own bytes
    assert fds() == before  # the pty, the pipe and the wake-up pipe are closed


def test_stdout_is_a_terminal_so_a_line_arrives_before_the_program_ends():
    output = Output()
    cmd = Command([sys.executable, TALKS, "--hold", "5"], stdout=output)
    cmd.start()
    try:
        end = time.monotonic() + 10
        while "hello on stdout" not in output.kept().text() and time.monotonic() < end:
            time.sleep(0.05)
        # printed without a flush: through a pipe it would wait in the program for its exit
        assert "talks: hello on stdout" in output.kept().text()
        assert cmd.proc is not None and cmd.proc.poll() is None
    finally:
        cmd.close()  # stopped as on q: the capture still ends
    assert output.kept().ended


def test_the_last_bytes_are_kept_and_what_came_before_is_counted():
    output, _ = run("--bytes", "300000", keep=64 << 10)
    kept = output.kept()
    assert kept.total > 300000
    assert sum(len(c.data) for c in kept.chunks) == 64 << 10
    assert kept.dropped == kept.total - (64 << 10)
    assert kept.text().rstrip().endswith("talks: bye")
    assert "xEND" in kept.text()


def test_stdin_is_not_the_terminal():
    output, _ = run("--ask")
    # /dev/null: read at once, empty; it never waits on the inspector's keyboard
    assert (STDOUT, "talks: hello ") in output.kept().lines()


def test_a_line_rewritten_after_a_carriage_return_and_colours_as_a_terminal_leaves_them():
    kept = Kept(
        (
            Chunk(STDOUT, b"10%\r50%\r100%\n\x1b[31mred\x1b[0m "),
            Chunk(STDERR, b"oops\n"),
            Chunk(STDOUT, b"\x1b]0;title\x07end\n"),
        ),
        0,
        0,
        True,
    )
    assert kept.lines() == [(STDOUT, "100%"), (STDERR, "oops"), (STDOUT, "red end")]


def _trace(*args: str) -> subprocess.CompletedProcess:
    return vmmtui_trace(*args, timeout=60)


def test_json_keeps_stdout_for_the_stream_and_the_programs_output_goes_to_stderr():
    res = _trace("--json", "--poll", "--", sys.executable, TALKS, "--raise")
    assert res.returncode == 1
    for line in res.stdout.splitlines():
        assert json.loads(line)["v"] == 1  # nothing but the stream
    assert "talks: hello on stdout" in res.stderr and "talks: a warning on stderr" in res.stderr
    assert "RuntimeError: talks: something went wrong" in res.stderr


def test_text_and_quiet_pass_the_programs_output_through():
    for mode in ("--text", "-q"):
        res = _trace(mode, "--poll", "--", sys.executable, TALKS)
        assert res.returncode == 0
        assert "talks: hello on stdout" in res.stdout and "talks: bye" in res.stdout
        assert "talks: a warning on stderr" in res.stderr


def test_an_interactive_program_reads_the_terminal_in_text_mode():
    """--text passes the terminal through: the program asks, the user answers, it replies."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: vmmtui on a terminal, as a user runs it
        os.execvp(
            sys.executable,
            [sys.executable, "-m", "vmmtui", "trace", "--text", "--poll", "--", sys.executable,
             TALKS, "--ask"],
        )  # fmt: skip
    seen = b""
    answered = False
    end = time.monotonic() + 30
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            seen += data
            if b"your name?" in seen and not answered:
                os.write(fd, b"Ada\n")
                answered = True
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    assert b"talks: hello Ada" in seen, seen[-500:]
    assert os.waitstatus_to_exitcode(status) == 0


def test_printed_after_the_inspector_each_stream_to_its_own_with_a_line_that_says_whose(capfd):
    from vmmtui.cli.trace import print_output

    output, _ = run("--raise", keep=1 << 10)
    print_output(output, [sys.executable, TALKS, "--raise"], "trace")
    out, err = capfd.readouterr()
    assert "talks: hello on stdout" in out and "Traceback" not in out
    assert "Traceback (most recent call last):" in err
    assert err.startswith("vmmtui trace: the output of ") and "while the inspector was open" in err
    big, _ = run("--bytes", "5000", keep=1 << 10)
    print_output(big, ["talks"], "trace")
    out, err = capfd.readouterr()
    assert "were dropped, the last 1 KiB follow" in err and out.endswith("talks: bye\n")
