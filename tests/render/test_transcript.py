"""Transcripts: JSON lines are the events themselves; Markdown tells the session in narration's words."""

from __future__ import annotations

import re

from tests.events_fixture import SAME, session_events
from vmmtui.render.transcript import Transcript
from vmmtui.stream.events import Event
from vmmtui.words import narration


def write(path, events) -> str:
    t = Transcript(path)
    for e in events:
        t.write(e)
    t.close()
    return path.read_text()


def test_json_lines_are_event_to_json_and_read_back(tmp_path):
    events = session_events(consumers=2)
    lines = write(tmp_path / "t.jsonl", events).splitlines()
    assert lines == [e.to_json() for e in events]
    assert [Event.from_json(line) for line in lines] == events


def test_markdown_tells_steps_kcmp_once_and_the_result(tmp_path):
    text = write(tmp_path / "t.md", session_events(consumers=2))
    assert text.startswith("# vmmtui transcript")
    assert "## consumer-2: Read and verify the pattern (ok" in text
    assert "    Data verification PASSED (262144 integers verified)" in text
    for k in (1, 2):
        assert text.count(f"**kcmp(KCMP_FILE)**: producer fd 5 ≡ consumer-{k} fd 5: {SAME}") == 1
    result = text.split("## Result", 1)[1]
    assert (
        narration.VERIFIED in result
        and "2/2 consumers' fds were the producer's open file description (before cleanup)"
        in result
    )
    assert narration.CLEAN in text


def test_the_end_lines_of_run_the_transcript_and_the_log_say_the_result_the_same_way(tmp_path):
    from test_console import printed

    from vmmtui.view import fold
    from vmmtui.words.log import log_text

    for consumers in (1, 3):
        events = session_events(consumers=consumers)
        run = printed(events)[0].strip().splitlines()[-1]
        md = write(tmp_path / f"t{consumers}.md", events).split("## Result", 1)[1].strip()
        md = md.splitlines()[0]
        state = fold(events)
        logged = next(
            log_text(line).plain
            for line in reversed(state.log_lines())
            if log_text(line).plain.startswith(narration.VERIFIED)
        )
        assert md == logged, (md, logged)
        # vmmtui run's line says the same (its count is its own: the fixture's session made up
        # another), with the close after it
        run = re.sub(r"\d+/\d+ match", "N/N match", run)
        assert run.startswith(re.sub(r"\d+/\d+ match", "N/N match", md) + " · "), (run, md)
        assert run.endswith(narration.CLEAN)
        assert "fd cross-check: " in md and "(before cleanup)" in md
