"""One run, one answer: a trace recording opens at call N as a demo opens at step N, its
verdicts are found again in today's words (the panel and the verdict say one end), and the end
line, ``--json`` and the screen give one count of findings."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from tests.commands import screen_text
from vmmtui.cli import main
from vmmtui.pipeline.replay import read, trace_timeline
from vmmtui.tui.replay import ReplayApp
from vmmtui.words.findings import finding_words, words_of

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "tests" / "data" / "traces"
KILLED = ROOT / "vmmtui" / "record" / "gallery" / "h100-trace-torch-kill-exporter.jsonl.gz"


def test_step_of_a_trace_recording_counts_its_calls(capsys, tmp_path):
    path = TRACES / "scm_pair.jsonl.gz"
    calls = trace_timeline(read(path).events).frames[-1].steps
    assert calls > 3
    code = main(["replay", str(path), "--step", str(calls + 1), "--html", str(tmp_path / "x.html")])
    err = capsys.readouterr().err
    assert code == 2 and f"has {calls} calls (give 0 to {calls})" in err, err


@pytest.mark.asyncio
async def test_replay_step_opens_a_trace_at_that_call():
    recording = read(TRACES / "scm_pair.jsonl.gz")
    app = ReplayApp(recording, start_at=3)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.frames.frames[app.frame].steps == 3
        assert app.frame == app.timeline.frame_of_step(3) > 0


@pytest.mark.asyncio
async def test_a_killed_exporter_is_said_killed_by_sigkill_by_the_panel_and_the_verdict():
    """The recording's verdict said "exited with code 9" (older words); the replay finds it again
    and says it as the exporter's panel does."""
    with gzip.open(KILLED, "rt") as f:
        assert "exited with code 9" in f.read()  # the words the file carries
    recording = read(KILLED)
    app = ReplayApp(recording)
    async with app.run_test(size=(160, 48)) as pilot:
        app.go(app.frames.last)
        await pilot.pause()
        await pilot.pause()
        v = app.frames.at(app.frames.last).programs
        assert v is not None
        verdicts = [
            words_of(f.of).detail for f in v.finding_list() if f.kind == "held-after-exporter-died"
        ]
        assert len(verdicts) == 2 and all("was killed by SIGKILL" in d for d in verdicts)
        text = screen_text(app)
        assert "code 9" not in text and "signal 9" not in text
        assert "killed by SIGKILL" in text
        # legacy IPC imports: matched by the handle bytes, never "by the kernel's struct file"
        assert "proven by the 64 IPC handle bytes" in text and "struct file" not in text


def test_the_end_line_and_json_give_one_count(capsys):
    """``replay --text`` (the end line) and the re-folded stream count every finding alike."""
    path = TRACES / "scm_pair.jsonl.gz"  # recorded by a pipeline that counted 0 for its share
    assert main(["replay", str(path), "--text"]) == 0
    out = capsys.readouterr().out
    from vmmtui.pipeline.session import refold
    from vmmtui.stream.observed import LedgerFinding, TraceFinished

    again = refold(read(path).events)
    found = [e for e in again if isinstance(e, LedgerFinding)]
    end = next(e for e in again if isinstance(e, TraceFinished))
    assert end.findings == len(found) > 0
    n = len(found)
    assert re.search(rf"\b{n} finding{'s' if n != 1 else ''}\b", out), out


class _Replayed:
    """A recorded eBPF run played as a live ``trace -p`` source: its calls, then its end; the
    ``-p`` target is a real process (this one's child), read from /proc as a live run reads it."""

    def __init__(self, path: Path, pid: int) -> None:
        from vmmtui.pipeline.session import RecordingSource

        self.inner = RecordingSource(read(path).events)
        self.pids, self.command, self.proc, self.exit = [pid], [], None, None
        self.stopping = False

    def events(self, on_batch=None):
        yield from self.inner.events(on_batch)


@pytest.mark.asyncio
async def test_the_text_and_the_inspector_record_the_same_run_alike(capsys):
    """``trace --text --record A`` and the inspector's ``--record B`` of one run: the same event
    kinds, the same findings, the same count at the end."""
    import argparse
    import subprocess
    import sys

    from vmmtui.cli.trace import Tee, _print
    from vmmtui.pipeline.session import TraceSession
    from vmmtui.stream.observed import LedgerFinding, TraceFinished
    from vmmtui.tui.trace import TraceApp

    path = TRACES / "fake_cuda_calls.jsonl.gz"
    target = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        text = Tee(None, [], True)
        args = argparse.Namespace(json=True, quiet=False)
        _print(TraceSession(_Replayed(path, target.pid), [text]), args)
        capsys.readouterr()
        screen: list = []
        app = TraceApp(_Replayed(path, target.pid), sink=screen.append)
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(200):
                await pilot.pause(0.02)
                if app.ended:
                    break
            assert app.ended
    finally:
        target.kill()
        target.wait()

    def kinds(events):
        return [type(e).__name__ for e in events]

    def found(events):
        return [
            (f.kind, f.pid, finding_words(f).what) for f in events if isinstance(f, LedgerFinding)
        ]

    assert kinds(screen) == kinds(text.seen) and "ProcessSeen" in kinds(screen)
    assert found(screen) == found(text.seen) != []
    ends = [e for e in (*text.seen, *screen) if isinstance(e, TraceFinished)]
    assert len(ends) == 2 and ends[0] == ends[1] and ends[0].findings == len(found(screen))
