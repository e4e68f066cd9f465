"""replay --notes in the app: the note of the frame shown sits in the teaching panel, and goes with
the frame; a Markdown transcript keeps every note after its step's events."""

import pytest
from driving import text_of

from vmmtui.record import Timeline, gallery
from vmmtui.record.notes import bind, split
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.teaching import TeachingPanel

NOTES = "## start\nWatch the fd tables.\n\n## 8\nThe fd is a handle, not the memory.\n\n## end\nNothing left.\n"


@pytest.mark.asyncio
async def test_the_note_of_the_frame_shown_is_in_the_teaching_panel(tmp_path):
    rec = gallery.resolve("h100-vmm-1mib")
    notes = bind(*split(NOTES), Timeline(rec.events))
    transcript = tmp_path / "lecture.md"
    app = ReplayApp(rec, notes=notes, transcript=str(transcript))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        panel = app.query_one(TeachingPanel)
        assert "teacher's note (start): Watch the fd tables." in text_of(panel)
        await pilot.press("right")
        assert "teacher's note" not in text_of(panel) and not panel.has_class("-noted")
        app.goto(app.timeline.frame_of_step(8))
        await pilot.pause()
        shown = text_of(panel)
        assert "teacher's note (step 8: producer · export): The fd is a handle" in shown
        assert "cuMemExportToShareableHandle" not in shown.split("teacher's note")[1]
        await pilot.press("left")  # the note goes with its frame
        assert "teacher's note" not in text_of(panel)
        await pilot.press("end")
        assert "teacher's note (end): Nothing left." in text_of(panel)
        await pilot.press("left_square_bracket")  # the previous note: step 8
        assert app.frame == app.timeline.frame_of_step(8)
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert app.frame == 0  # the start's note, and no further back
        await pilot.press("right_square_bracket")
        assert app.frame == app.timeline.frame_of_step(8)
    md = transcript.read_text()
    export = md.index("teacher's note (step 8: producer · export)")
    assert (
        md.index("## producer: Export the allocation")
        < export
        < md.index("## producer: Listen on the Unix socket")
    )
    assert "> The fd is a handle, not the memory." in md and md.count("teacher's note") == 3
