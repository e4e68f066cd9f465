"""--html's frames: drawn by the replay app itself; a drawing that ends early writes no page."""

import pytest

from vmmtui.record import gallery
from vmmtui.tui import flipbook
from vmmtui.tui.replay import ReplayApp


@pytest.mark.slow
def test_every_frame_is_drawn_and_the_last_holds_passed():
    frames, log, stopped = flipbook.draw_frames(gallery.resolve("cpu-memfd-1mib"), size=(120, 36))
    assert stopped is None and [f.steps for f in frames][:3] == [0, 1, 2]
    assert "PASSED" in frames[-1].svg and "PASSED" not in frames[0].svg
    assert frames[1].role == "producer" and frames[-1].label == "closed"
    # the page shows the log and its own keys: the frames hold neither the log nor the footer
    assert "event log" not in frames[-1].svg and "Screenshot" not in frames[-1].svg
    counts = [f.log for f in frames]
    assert counts == sorted(counts) and counts[-1] == len(log) and 0 < counts[1] < len(log)
    assert any("memfd_create" in line for line in log[counts[1] : counts[4]])


def test_a_replay_that_ends_before_its_last_frame_writes_no_page(tmp_path, monkeypatch):
    export = ReplayApp.export_screenshot

    def breaks_at_the_third(self, *a, **kw):
        self.shots_exported = getattr(self, "shots_exported", 0) + 1
        if self.shots_exported == 3:
            raise OSError(28, "No space left on device")
        return export(self, *a, **kw)

    monkeypatch.setattr(ReplayApp, "export_screenshot", breaks_at_the_third)
    page = tmp_path / "lecture.html"
    with pytest.raises(flipbook.DrawingError, match=r"could not draw frame 2 \(step 2: producer"):
        flipbook.write_page(str(page), gallery.resolve("cpu-memfd-1mib"))
    assert not page.exists()
