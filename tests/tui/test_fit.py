"""Every size the inspector is drawn at keeps each worker's declared fds on screen, or says how many
it folded; a step list cut short says so; no table runs past its widget (vmmtui/view/budget.py).

Driven with Pilot on real memfd sessions and on the gallery's recordings, at 80×24 … 200×60."""

import re

import pytest
from driving import MEMFD, wait_for

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import role_steps
from vmmtui.record import Timeline, gallery
from vmmtui.record.notes import bind, split
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.process_panel import ProcessPanel
from vmmtui.view.budget import Window, fd_order, share, window

SIZES = [(80, 24), (120, 40), (160, 48), (200, 60)]
FD_ROW = re.compile(r"^\s*(\d+)\s")
MORE = re.compile(r"\+(\d+) more")


def drawn(widget) -> list[str]:
    """The lines a widget shows: its content rendered at its width, cut at its height."""
    console = widget.app.console
    lines = console.render_lines(
        widget.content, console.options.update_width(widget.size.width), pad=False
    )
    return ["".join(s.text for s in line).rstrip() for line in lines]


def check_panel(app, panel: ProcessPanel, where: str) -> None:
    """The panel's fd table inside its border, not clipped; every declared fd shown or counted on
    a "+N more" line, the exported and the received fd and the front consumer's connection shown;
    a step list that shows fewer steps than the plan has says how many it folded."""
    state = app.state_shown()
    view = state.panel(panel.role)
    table = panel.query_one(FdTableView)
    where = f"{where} {panel.role}"
    assert panel.content_region.contains_region(table.region), (where, table.region)
    lines = drawn(table)
    assert len(lines) <= table.size.height, (where, "the fd table runs past its widget", lines)
    if view.fds is None or view.fds.error:
        return
    declared = [r for r in view.fds.rows if r.check is not None]
    shown = {int(m.group(1)) for line in lines if (m := FD_ROW.match(line))}
    missing = [r for r in declared if r.fd not in shown]
    if missing:
        counted = [int(m.group(1)) for line in lines if (m := MORE.search(line))]
        assert counted and counted[0] >= len(missing), (where, "fds folded with no sign", lines)
    front = state.front or state.roles[1]
    for r in fd_order(declared, front)[:2]:  # the exported/received fd, then the connection
        if str(r.kind) in ("exported", "received") or f"connection to {front} " in r.note:
            assert r.fd in shown, (where, r, lines)
    steps = panel.query_one(f"#{panel.role}-steps")
    if steps.display and steps.size.height:
        rows = drawn(steps)
        assert len(rows) <= steps.size.height, (where, "the step list runs past its widget")
        names = role_steps(panel.role, list(state.plan))
        listed = [line for line in rows if line[:1] in "✓✗▶·"]
        if len(listed) < len(names):
            assert any("…" in line and "steps" in line for line in rows), (where, rows)


def visible_panels(app) -> list[ProcessPanel]:
    state = app.state_shown()
    front = state.front or state.roles[1]
    return [app.panel("producer"), app.panel(front)]


async def check_every_frame(pilot, app, where: str, stride: int = 1) -> None:
    last = app.frames.last
    for k in sorted({*range(0, last + 1, stride), last}):
        app.go(k)
        await pilot.pause()
        await pilot.pause()
        for panel in visible_panels(app):
            check_panel(app, panel, f"{where} frame {k}")


def test_a_window_keeps_its_focus_and_counts_both_folded_ends():
    assert window(10, 20, 3) == Window(0, 10, 10)
    w = window(34, 10, 20)
    assert w.start <= 20 < w.stop and w.rows == 10 and w.before and w.after
    assert w.folded == 34 - (w.stop - w.start)
    end = window(34, 10, 33)
    assert end.stop == 34 and end.rows == 10 and end.after == 0
    assert window(34, 2, 5).rows == 1  # only one line fits: it counts them all
    assert share(20, 8, 10, 6).card is False and share(20, 8, 10, 6).steps == 10
    assert share(30, 8, 10, 6) == share(30, 8, 10, 6).__class__(10, True)
    assert share(12, 8, 10, 6).steps == 4


async def run_and_check(tmp_path, consumers: int, sizes, stride: int) -> None:
    config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), consumers=consumers)
    app = InspectorApp(config, MEMFD)
    async with app.run_test(size=sizes[0]) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.stopped and not app.busy, timeout=90)
        assert app.session.verified
        for size in sizes:
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await check_every_frame(pilot, app, f"{consumers} consumers {size}", stride=stride)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_eight_consumers_at_160x48_show_the_producers_exported_fd(tmp_path):
    """With 8 consumers at 160×48 the producer's 34 steps pushed its fd table, and the exported fd
    in it, below its border; the step list was cut with no sign."""
    await run_and_check(tmp_path, 8, [(160, 48)], stride=9)


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("consumers", [1, 3, 8])
async def test_every_size_keeps_the_declared_fds_or_says_what_it_folded(tmp_path, consumers):
    await run_and_check(tmp_path, consumers, SIZES, stride=3)


NOTES = (
    "## start\nWatch the fd tables: the exported fd is the lesson.\nA second line.\nA third.\n\n"
    "## 8\nThe fd is a handle, not the memory.\nIt is an open file description.\nMore.\nMore.\n\n"
    "## end\nNothing left.\n"
)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "size", [(160, 48), *(pytest.param(s, marks=pytest.mark.slow) for s in SIZES if s != (160, 48))]
)
async def test_replay_with_notes_keeps_the_connection_fd_and_the_fold_line(size):
    """At 160×48 with --notes the producer's connection fd and its "+N more" line vanished."""
    rec = gallery.resolve("h100-vmm-1mib")
    notes = bind(*split(NOTES), Timeline(rec.events))
    app = ReplayApp(rec, notes=notes)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await check_every_frame(pilot, app, f"notes {size}")


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["h100-consumers4-writes", "h100-scenario-leaked-fd"])
async def test_gallery_recordings_fit_at_every_size(name):
    app = ReplayApp(gallery.resolve(name))
    async with app.run_test(size=(160, 48)) as pilot:
        for size in SIZES:
            await pilot.resize_terminal(*size)
            await pilot.pause()
            await check_every_frame(pilot, app, f"{name} {size}", stride=2)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_replay_at_step_n_opens_with_the_log_at_step_ns_lines(size):
    """``replay --step N`` opened with the event log at its top (cuInit), far from step N."""
    rec = gallery.resolve("h100-vmm-1mib")
    app = ReplayApp(rec, start_at=8)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        log = app.query_one(EventLog)
        height = log.scrollable_content_region.height
        assert log.line_count > height  # the log is longer than its window: where it is matters
        assert log.scroll_offset.y == log.line_count - height, (log.scroll_offset, log.line_count)
        shown = log.plain_lines()[log.scroll_offset.y : log.scroll_offset.y + height]
        assert not any("cuInit" in line for line in shown), shown


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_every_consumers_tab_is_on_screen(size):
    """With 4 consumers at 80×24 the tab row ended in "consumer-" (the fourth cut, no sign)."""
    from vmmtui.tui.cast import plain, screen_ansi

    app = ReplayApp(gallery.resolve("h100-consumers4-writes"))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.pause()
        screen = plain(screen_ansi(app))
        tab_row = next(
            line for line in screen.splitlines() if "c1" in line or "consumer-1 " in line
        )
        for k in range(1, 5):
            assert re.search(rf"\b(consumer-{k}|c{k})\b", tab_row), (k, tab_row)


@pytest.mark.asyncio
async def test_teaching_text_and_status_line_cut_at_80x24_say_so():
    """At 80×24 the step's text and the status line were cut at the panel's edge with no sign."""
    from vmmtui.tui.cast import plain, screen_ansi
    from vmmtui.tui.widgets.teaching import TeachingPanel

    app = ReplayApp(gallery.resolve("h100-vmm-1mib"))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        panel = app.query_one(TeachingPanel)
        assert len(panel.full.wrap(app.console, panel.size.width)) > panel.size.height  # longer
        screen = plain(screen_ansi(app)).splitlines()
        region = panel.region
        rows = screen[region.y + 1 : region.y + region.height - 1]
        assert rows and rows[-1].rstrip("│ ").endswith("…"), rows
        app.go(app.frames.last)
        await pilot.pause()
        await pilot.pause()
        status = plain(screen_ansi(app)).splitlines()[app.query_one("#status").region.y]
        assert status.rstrip().endswith("…") or len(status.rstrip()) < 79, status


@pytest.mark.asyncio
async def test_at_80x24_the_teachers_note_keeps_its_rows_and_the_step_text_gives_way():
    from vmmtui.tui.cast import plain, screen_ansi
    from vmmtui.tui.widgets.teaching import TeachingPanel

    rec = gallery.resolve("h100-vmm-1mib")
    # a note of five rows: with the step's text the panel's six rows cannot hold both
    longer = NOTES.replace("More.\nMore.", " ".join(["It is an open file description."] * 7))
    app = ReplayApp(rec, notes=bind(*split(longer), Timeline(rec.events)))
    async with app.run_test(size=(80, 24)) as pilot:
        app.go(app.timeline.frame_of_step(8))
        await pilot.pause()
        await pilot.pause()
        region = app.query_one(TeachingPanel).region
        rows = plain(screen_ansi(app)).splitlines()[region.y + 1 : region.y + region.height - 1]
        drawn = " ".join(rows)
        assert "teacher's note (step 8" in drawn, rows
        assert "…" in drawn  # the step's text, cut, says so


@pytest.mark.asyncio
async def test_at_80x24_a_teachers_note_grows_the_panel_and_a_longer_one_counts_its_lines():
    """The lecture's notes were cut to two lines and "…" at 80×24 (docs/layout.md: the panel
    grows); what still does not fit says how many lines it left out."""
    from pathlib import Path

    from vmmtui.record.notes import read
    from vmmtui.tui.cast import plain, screen_ansi
    from vmmtui.tui.widgets.teaching import TeachingPanel

    rec = gallery.resolve("h100-vmm-1mib")
    lecture = Path(__file__).parents[2] / "docs" / "lecture-notes.md"
    app = ReplayApp(rec, notes=read(str(lecture), Timeline(rec.events)), start_at=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()

        def drawn() -> str:
            region = app.query_one(TeachingPanel).region
            rows = plain(screen_ansi(app)).splitlines()[region.y + 1 : region.y + region.height - 1]
            return " ".join(" ".join(r.strip("│ ") for r in rows).split())

        assert "now is what allows the export later." in drawn(), drawn()  # the note's end
    long = " ".join(f"sentence {k} of a note that runs on." for k in range(40))
    app = ReplayApp(rec, notes=bind(*split(f"## 3\n{long}\n"), Timeline(rec.events)), start_at=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        said = re.search(r"… \+(\d+) lines$", drawn())
        assert said, drawn()
        panel = app.query_one(TeachingPanel)
        whole = len(panel.note_text.wrap(app.console, panel.size.width))
        assert int(said.group(1)) == whole - panel.size.height


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(120, 36), (80, 24)])
async def test_a_mapping_card_left_out_is_said_on_its_panels_border(size):
    """With several consumers the producer's card was dropped at small sizes with no sign."""
    from vmmtui.tui.cast import plain, screen_ansi

    app = ReplayApp(gallery.resolve("h100-consumers4-writes"))
    async with app.run_test(size=size) as pilot:
        seen = 0
        for frame in (app.frames.last // 2, app.frames.last):
            app.go(frame)
            await pilot.pause()
            await pilot.pause()
            screen = plain(screen_ansi(app)).splitlines()
            for panel in app.query(ProcessPanel):
                s, region = panel.worker_state, panel.region
                if not region.height or s is None or s.mapping.handle is None:
                    continue  # on another tab, or nothing in its card
                if app.query_one(f"#{panel.role}-card").region.height:
                    continue  # drawn
                border = screen[region.y + region.height - 1][region.x : region.right]
                assert re.search(r"\+ mapping card \(\d+ rows\)", border), (frame, border)
                seen += 1
        assert seen  # some card was left out at this size, and said


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_workers_header_keeps_n_of_n_steps_on_one_line(size):
    """At 80x24 a header wrapped between "3/10" and "steps", and "steps" alone on a line read as
    the title of an empty step list: the count and its word now go to the next line together."""
    app = ReplayApp(gallery.resolve("h100-vmm-1mib"))
    async with app.run_test(size=size) as pilot:
        for frame in (0, 8, 14, app.frames.last):
            app.go(frame)
            await pilot.pause()
            for panel in app.query(ProcessPanel):
                head = drawn(panel.query_one(f"#{panel.role}-head"))
                assert "steps" not in [line.strip() for line in head], (size, frame, head)
                assert any(re.search(r"\d+/\d+ steps", line) for line in head), (size, head)
        await pilot.resize_terminal(160, 48)  # wide enough: one line again
        await pilot.pause()
        for panel in app.query(ProcessPanel):
            assert len(drawn(panel.query_one(f"#{panel.role}-head"))) == 1
