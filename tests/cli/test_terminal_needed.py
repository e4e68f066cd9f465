"""Full-screen commands without a terminal (a pipe, a file, /dev/null, a script): one line that
says so and what to run instead, exit 2, at once; never the app's escape codes in the pipe, never
a process spinning on a stdin that has no keys. What needs no screen still works."""

from __future__ import annotations

import pytest

from tests.commands import vmmtui


@pytest.mark.parametrize(
    "args, instead",
    [
        (["replay", "cpu-memfd-1mib"], "--html"),
        (["replay", "cpu-memfd-1mib", "--autoplay", "--screenshots", "shots"], "--html"),
        (["--backend", "memfd"], "vmmtui run"),
    ],
    ids=["replay", "replay-screenshots", "inspector"],
)
def test_a_full_screen_command_without_a_terminal_is_one_line_and_exit_2(tmp_path, args, instead):
    res = vmmtui(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "needs a terminal" in err[0] and instead in err[0], err
    assert "\x1b[" not in res.stdout + res.stderr and res.stdout == ""


def test_bad_input_is_said_before_the_missing_terminal(tmp_path):
    res = vmmtui("--backend", "memfd", "--consumers", "9", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.strip() == "vmmtui: --consumers 9: choose 1 to 8"


def test_a_replays_transcript_needs_no_terminal(tmp_path):
    res = vmmtui("replay", "cpu-memfd-1mib", "--transcript", "t.md", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "wrote t.md" in res.stdout and "\x1b[" not in res.stdout + res.stderr
    text = (tmp_path / "t.md").read_text()
    assert text.startswith("# vmmtui transcript") and "VERIFIED" in text.upper()


@pytest.mark.slow
def test_a_replays_page_needs_no_terminal(tmp_path):
    res = vmmtui("replay", "cpu-memfd-1mib", "--html", "p.html", cwd=tmp_path)
    assert res.returncode == 0 and (tmp_path / "p.html").stat().st_size > 10_000, res.stderr
