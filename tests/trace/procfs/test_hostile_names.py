"""Names from /proc are attacker-controlled: a real process names itself, its memfds, a /dev/shm file
and a socket with terminal escapes, C1 CSI, a bidi override and a newline. ``attach --once``,
``--json``, ``watch`` and ``trace -p`` must write none of them raw: the bytes are checked."""

import os
import subprocess
import sys

import pytest

from tests.trace.procfs.helpers import FIXTURES, ROOT
from vmmtui.stream.events import Event, FdOpened, ProcessSeen

HOSTILE = str(FIXTURES / "hostile_names.py")
#: what must never reach a terminal: ESC, C1 CSI (raw and UTF-8), the bidi override, a forged line
RAW = [b"\x1b", b"\x9b", "\u202e".encode(), b"\x07"]


def assert_safe(out: bytes) -> None:
    for bad in RAW:
        assert bad not in out, (
            f"{bad!r} written raw at {out.find(bad)}: {out[out.find(bad) - 80 :][:160]!r}"
        )
    forged = [line for line in out.splitlines() if line.startswith(b"FAKE LINE")]
    assert not forged, forged


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", *args],
        capture_output=True,
        timeout=90,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        cwd=FIXTURES,
    )


@pytest.fixture
def hostile():
    proc = subprocess.Popen(
        [sys.executable, HOSTILE, "\x1b[2J-argv"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().split()
    assert line[:1] == ["ready"], line
    yield int(line[1]), int(line[2])
    proc.stdin.close()
    proc.wait(timeout=20)


def test_attach_once_writes_every_hostile_name_escaped(hostile):
    res = run("attach", "--once", *map(str, hostile))
    assert res.returncode == 0, res.stderr
    assert_safe(res.stdout + res.stderr)
    out = res.stdout.decode()
    assert "\\x1b]0;PWNED\\x07" in out and "\\x1b[2J" in out  # still recognisable
    assert "\\u202eevil" in out and "\\x9b31mC1" in out and "\\nFAKE LINE" in out
    assert "\\x1b[31m[/]EVIL" in out and "SHARED memfd" in out


def test_attach_json_keeps_the_raw_names_as_data_and_writes_none_raw(hostile):
    res = run("attach", "--once", "--json", *map(str, hostile))
    assert res.returncode == 0, res.stderr
    assert_safe(res.stdout)
    events = [Event.from_json(x) for x in res.stdout.decode().splitlines()]
    targets = {e.target for e in events if isinstance(e, FdOpened)}
    assert "/memfd:\x1b]0;PWNED\x07 (deleted)" in targets  # the value read back is the raw name
    assert "/memfd:\u202eevil (deleted)" in targets
    assert {e.name for e in events if isinstance(e, ProcessSeen)} == {"\x1b[31m[/]EVIL"}


@pytest.mark.parametrize("json", [False, True])
def test_watch_writes_every_hostile_name_escaped(json):
    res = run("watch", *(["--json"] if json else []), "--", sys.executable, HOSTILE, "1.5")
    assert res.returncode == 0, res.stderr
    assert_safe(res.stdout + res.stderr)
    assert b"PWNED" in res.stdout and b"FAKE LINE" in res.stdout


def test_trace_p_writes_what_is_already_true_with_every_hostile_name_escaped(hostile):
    """``trace -p`` (eBPF or polling) starts from the processes' fds and shares, read from /proc:
    the names in those lines, and in the ledger's findings, go through the sanitiser."""
    res = run("trace", "-p", *map(str, hostile), "--text", "--duration", "1")
    assert res.returncode == 0, res.stderr
    assert_safe(res.stdout + res.stderr)
    out = res.stdout.decode()
    assert "\\x1b]0;PWNED\\x07" in out and "\\x1b[31m[/]EVIL" in out and "SHARED memfd" in out


def test_the_session_console_prints_a_hostile_fd_target_escaped():
    """The run console (and a replay of a hostile recording through it) shows fd check details,
    which name /proc targets, through the sanitiser too."""
    import io

    from vmmtui.render.console import LogPrinter
    from vmmtui.stream.events import FdRow, FdSnapshot

    out = io.StringIO()
    row = FdRow(
        5, "/memfd:\x1b]0;PWNED\x07", "received", "", "mismatch", "now /memfd:\x1b[2J\nFAKE LINE"
    )
    LogPrinter(out)(FdSnapshot("consumer", 1, "alive", [row]))
    assert_safe(out.getvalue().encode())
    assert "\\x1b[2J\\nFAKE LINE" in out.getvalue()
