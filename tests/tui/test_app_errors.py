"""The inspector's own failures: a session that cannot start, files it cannot write, paths it refuses.

Each is made to happen for real (a worker that cannot say hello in time, a directory the process
may not write, a path whose directory does not exist) and must end in one line, never a traceback,
with nothing left behind.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from driving import MEMFD, make_app, step_to, text_of, wait_for

from vmmtui.backends import Choice
from vmmtui.plan.config import SessionConfig
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.teaching import TeachingPanel

ROOT = os.geteuid() == 0


def log_text(app) -> str:
    return "\n".join(strip.text for strip in app.query_one(EventLog).lines)


class Freezable:
    """A directory that can be made unwritable for this process: chmod 0500, or, as root (whom
    permissions do not stop), a tmpfs mounted on it and remounted read-only."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir()
        self.mounted = False
        if ROOT:
            r = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)], capture_output=True
            )
            if r.returncode:
                pytest.skip(
                    f"running as root and cannot mount a tmpfs to make read-only: {r.stderr.strip()!r}"
                )
            self.mounted = True

    def freeze(self) -> Path:
        if self.mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(self.path)], check=True)
        else:
            self.path.chmod(0o500)
        return self.path

    def thaw(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "--lazy", str(self.path)], check=True)
        else:
            self.path.chmod(0o700)


@pytest.fixture
def frozen(tmp_path):
    d = Freezable(tmp_path / "ro")
    yield d
    d.thaw()


def inspector(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", "--backend", "memfd", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.asyncio
async def test_a_session_that_cannot_start_says_why_in_the_panels_and_the_status_line(tmp_path):
    # start_timeout 0: the producer is launched for real but cannot say hello in time
    config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), start_timeout=0.0)
    app = InspectorApp(config, MEMFD)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.start_error is not None and app.session.closed)
        await pilot.pause(0.3)
        assert "producer worker did not start" in app.start_error
        assert "could not start: producer worker did not start" in text_of(
            app.query_one(StatusLine)
        )
        assert app.query_one(StatusLine).display  # visible in the large layout too
        teaching = app.query_one(TeachingPanel)
        assert "producer worker did not start" in text_of(teaching)
        assert teaching.border_title == "COULD NOT START"
        head = text_of(app.query_one("#producer-head"))
        assert "failed to start" in head and "starting" not in head
        assert "could not start: producer worker did not start" in log_text(app)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 1
    assert os.listdir(tmp_path) == []


@pytest.mark.asyncio
async def test_start_failure_then_restart_recovers(tmp_path):
    config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), start_timeout=0.0)
    app = InspectorApp(config, MEMFD)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.start_error is not None)
        app.config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path))
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        assert app.start_error is None
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_bad_input_found_at_start_exits_2_with_the_line(tmp_path):
    # the backend was chosen while the app came up (the probe): validate() refuses the size there
    small = Choice(
        "memfd", "memfd backend requested (CPU memory, not GPU memory)", capacity=64 << 10
    )
    app = InspectorApp(SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)), small)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.return_code is not None)
    assert app.return_code == 2
    assert app.refused and "1 MiB" in app.refused, app.refused
    assert os.listdir(tmp_path) == []


@pytest.mark.asyncio
async def test_s_in_a_read_only_directory_is_a_notification_and_a_log_line(
    tmp_path, frozen, monkeypatch
):
    monkeypatch.chdir(frozen.freeze())
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await pilot.press("s")
        await pilot.pause(0.3)
        assert "screenshot not saved" in log_text(app)
        said = " ".join(log_text(app).split())  # the log wraps a long path's line at its width
        assert "Permission denied" in said or "Read-only file system" in said
        assert any("screenshot not saved" in str(n.message) for n in app._notifications)
        await step_to(pilot, app, 1)  # the app goes on
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)


@pytest.mark.asyncio
async def test_screenshots_dir_that_turns_read_only_stops_the_pictures_not_the_session(
    tmp_path, frozen
):
    shots = frozen.path
    app = make_app(tmp_path, screenshots=str(shots))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        frozen.freeze()
        await step_to(pilot, app, 2)
        await pilot.pause(0.3)
        assert "no more screenshots" in log_text(app)
        assert app.session.position == 2
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None)


@pytest.mark.parametrize("case", ["missing-dir", "directory", "read-only"])
def test_transcript_paths_that_cannot_be_written_are_one_line_and_exit_2(tmp_path, frozen, case):
    target = {
        "missing-dir": tmp_path / "missing" / "t.md",
        "directory": tmp_path,
        "read-only": frozen.freeze() / "t.md",
    }[case]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    r = inspector("--transcript", str(target), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"vmmtui: --transcript {target}"), (
        r.stderr
    )
    assert "Traceback" not in r.stderr + r.stdout
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("case", ["names-a-file", "read-only", "inside-read-only"])
def test_screenshot_dirs_that_cannot_be_written_are_one_line_and_exit_2(tmp_path, frozen, case):
    if case == "names-a-file":
        target = tmp_path / "a-file"
        target.write_text("x")
    elif case == "read-only":
        target = frozen.freeze()
    else:
        target = frozen.freeze() / "new"
    r = inspector("--screenshots", str(target), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"vmmtui: --screenshots {target}"), (
        r.stderr
    )
    assert "Traceback" not in r.stderr + r.stdout


def test_screenshots_on_a_read_only_file_system_is_one_line(tmp_path):
    # /proc/self is not a place for files, whoever asks (root included)
    r = inspector("--screenshots", "/proc/self/vmmtui-shots", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--screenshots" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("command", [[], ["replay", "cpu-memfd-1mib"]])
@pytest.mark.parametrize("case", ["missing-dir", "directory"])
def test_cast_paths_are_checked_before_the_app_draws(tmp_path, command, case):
    target = {"missing-dir": tmp_path / "missing" / "x.cast", "directory": tmp_path}[case]
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    r = inspector(*command, "--cast", str(target), cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"vmmtui: --cast {target}"), r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "\x1b[" not in r.stderr + r.stdout
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before
