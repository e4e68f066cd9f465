"""`vmmtui serve` in a real headless Chromium: the page's terminal shows the replay (skipped without Chromium)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.cli.serve import command_line

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)


@pytest.mark.slow  # a real server and a real browser
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install -y chromium)")
def test_a_replay_served_to_a_real_browser_shows_the_inspector(tmp_path):
    out = tmp_path / "page.png"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "browser-screenshot.py"),
            "--out",
            str(out),
            "--text",
            "PASSED",
            "--",
            "replay",
            "cpu-memfd-1mib",
            "--step",
            "19",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    data = out.read_bytes()
    assert (
        data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    )  # a page with a drawn terminal, not blank


def test_serve_checks_what_it_will_serve_before_listening(tmp_path, capsys):
    assert command_line(["replay", str(tmp_path / "missing.jsonl")]) is None
    assert "no such file" in capsys.readouterr().err
    assert command_line(["run"]) is None
    assert "serves the inspector or `replay`" in capsys.readouterr().err
    cmd = command_line(["replay", "cpu-memfd-1mib", "--autoplay"])
    assert cmd[1:] == ["-m", "vmmtui", "replay", "cpu-memfd-1mib", "--autoplay"]
    assert command_line(["--backend", "memfd", "--size", "4MiB"])[-1] == "4MiB"
    with pytest.raises(SystemExit) as ex:
        command_line(["--size", "0"])
    assert ex.value.code == 2


def test_serve_passes_the_inspector_options_on():
    from vmmtui.cli import parser
    from vmmtui.cli.serve import inspector_argv

    args = parser().parse_args(
        ["serve", "--port", "9", "--backend", "memfd", "--size", "4MiB", "--autoplay"]
    )
    assert args.func.__name__ == "cmd_serve" and args.args == []
    assert inspector_argv(args) == ["--backend", "memfd", "--size", str(4 << 20), "--autoplay"]
    args = parser().parse_args(["serve", "replay", "cpu-memfd-1mib", "--step", "3"])
    assert inspector_argv(args) == [] and args.args == ["replay", "cpu-memfd-1mib", "--step", "3"]
