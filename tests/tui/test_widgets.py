"""The inspector's widgets fed a hand-made event stream (no workers): what each one renders."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from driving import wait_for
from events_fixture import SAME, session_batches
from rich.console import Console
from textual.widgets import Markdown

from vmmtui.backends import Choice
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.stream.events import KcmpVerdict, SessionFinished
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.commands import commands, key_name
from vmmtui.tui.messages import SessionEvents
from vmmtui.tui.screens.help import HelpScreen
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.wire import VerdictsPanel, WirePanel
from vmmtui.words import narration

MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")
ROOT = Path(__file__).resolve().parents[2]

PLAN = build_plan()


def offline_app(consumers: int = 1, **kw) -> InspectorApp:
    return InspectorApp(
        SessionConfig(backend="memfd", consumers=consumers), MEMFD, start_session=False, **kw
    )


def text_of(widget) -> str:
    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink)
        console.print(widget.content)
        return console.export_text()


def upto(batches, step: str, role: str):
    """Every event up to and including the batch of ``role``'s ``step``."""
    out = []
    for batch in batches:
        out += batch
        done = [e for e in batch if type(e).__name__ == "StepDone"]
        if done and (done[0].role, done[0].step) == (role, step):
            break
    return out


async def feed(app: InspectorApp, pilot, events) -> None:
    app.show(events)
    await app.rendered()
    await pilot.pause()


@pytest.mark.asyncio
async def test_kcmp_pair_note_appears_in_numbered_consumer_tabs():
    batches = session_batches(consumers=2)
    app = offline_app(consumers=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app, pilot, upto(batches, "verify", "consumer-2"))
        for name in ("consumer-1", "consumer-2"):
            view = app.query_one(f"#{name}-fds", FdTableView)
            assert view.panel.kcmp is not None and view.panel.kcmp.consumer == name
            assert "received ≡ producer 5" in text_of(view), name
        assert "≡ consumer-2 5" in text_of(app.query_one("#producer-fds", FdTableView))


@pytest.mark.asyncio
async def test_event_log_colours_numbered_consumers_like_consumer():
    app = offline_app(consumers=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app, pilot, upto(session_batches(consumers=2), "verify", "consumer-2"))
        tags = [
            seg for strip in app.query_one(EventLog).lines for seg in strip if seg.text == "cons "
        ]
        assert tags, "no consumer line in the log"
        assert all(
            seg.style is not None
            and seg.style.color is not None
            and seg.style.color.name == narration.role_style("consumer")
            for seg in tags
        )


@pytest.mark.asyncio
async def test_wire_panel_words_several_consumers_kcmp_as_narration_does():
    batches = session_batches(consumers=2)
    app = offline_app(consumers=2)
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app, pilot, upto(batches, "wait_ack:consumer-2", "producer"))
        wire = text_of(app.query_one(WirePanel))
        assert "2/2 consumers' fds are the producer's open file description" in " ".join(
            wire.split()
        )
        assert "2/2 consumers acknowledged" in wire
        await feed(
            app,
            pilot,
            [e for b in batches for e in b][
                len(upto(batches, "wait_ack:consumer-2", "producer")) :
            ],
        )
        finished = next(e for b in batches for e in b if isinstance(e, SessionFinished))
        # each pair closed at its consumer's cleanup, kcmp's last answers came at different steps
        summary = narration.kcmp_summary(finished.kcmp, finished.mechanism, 2, past=True).plain
        assert summary.endswith("were the producer's open file description (before cleanup)")
        assert summary in " ".join(text_of(app.query_one(WirePanel)).split())


@pytest.mark.asyncio
async def test_one_consumer_screen_shows_verdict_verification_and_status():
    batches = session_batches()
    app = offline_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await feed(app, pilot, upto(batches, "receive", "consumer"))
        status = text_of(app.query_one(StatusLine))
        assert f"producer fd 5 ≡ consumer fd 5: {SAME}" in status
        # compact: the narrow table keeps the note and drops the label (received)
        assert "≡ producer 5" in text_of(app.query_one("#consumer-fds", FdTableView))
        await feed(
            app, pilot, [e for b in batches for e in b][len(upto(batches, "receive", "consumer")) :]
        )
        assert "PASSED 262144 integers verified" in text_of(app.query_one(VerdictsPanel))
        status = text_of(app.query_one(StatusLine))
        assert narration.VERIFIED in status and "PASSED" in status
        wire = " ".join(text_of(app.query_one(WirePanel)).split())
        asked = PLAN.index(("consumer", "cleanup"))  # the last answer: the step before it
        pair = "producer fd 5 ≡ consumer fd 5"
        assert f"{pair} were the {SAME} (at step {asked})" in wire
        assert "verified (262144 integers)" in wire
        assert f"{pair} at step {asked} (kcmp; closed)" in status


@pytest.mark.asyncio
async def test_live_kcmp_repeats_are_logged_once():
    batches = session_batches()
    app = offline_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app, pilot, upto(batches, "receive", "consumer"))
        verdict = next(e for b in batches for e in b if isinstance(e, KcmpVerdict))
        app.show([verdict, verdict], live=True)
        await app.rendered()
        lines = ["".join(s.text for s in strip) for strip in app.query_one(EventLog).lines]
        assert sum("kcmp(KCMP_FILE)" in line for line in lines) == 1


@pytest.mark.asyncio
async def test_restart_reset_lands_after_the_old_sessions_events():
    app = offline_app()
    async with app.run_test(size=(160, 48)) as pilot:
        events = [e for b in session_batches() for e in b]
        app.post_message(SessionEvents(events, 0, closing=True, then="restart"))
        await pilot.pause()
        await app.rendered()
        assert app.query_one(VerdictsPanel).result is None
        assert app.query_one("#consumer-fds", FdTableView).snapshot is None
        assert app.panel("producer").results == {}
        assert app.frames.latest().era == 1  # the next session's lines are told apart
        assert "Closed cleanly" in "".join(s.text for s in app.query_one(EventLog).lines[-1])


@pytest.mark.asyncio
async def test_screenshot_is_taken_after_the_steps_events_are_rendered(tmp_path):
    batches = session_batches()
    app = offline_app(screenshots=str(tmp_path), stable=True)
    async with app.run_test(size=(160, 48)) as pilot:
        at = next(
            i for i, b in enumerate(batches) if any(getattr(e, "step", "") == "verify" for e in b)
        )
        app.show([e for b in batches[:at] for e in b])
        app.post_message(SessionEvents(batches[at], 0))
        for _ in range(100):
            if list(tmp_path.glob("*.svg")):
                break
            await pilot.pause(0.05)
        shots = list(tmp_path.glob("*.svg"))
        assert len(shots) == 1
        assert "PASSED" in shots[0].read_text()


@pytest.mark.asyncio
async def test_help_key_table_is_made_from_the_bindings():
    app = offline_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        source = app.screen.query_one(Markdown).source
        for c in commands(InspectorApp.BINDINGS):
            assert f"| {c.key_text} | {c.help} |" in source
        assert "`space`" in source and "`/`" in source and "`ctrl+p`" in source
        await pilot.press("escape")


@pytest.mark.asyncio
async def test_palette_runs_the_bound_actions_by_name():
    app = offline_app()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one("#producer-fds", FdTableView)
        assert not view.show_all
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await pilot.press(*"All fds")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert view.show_all


def test_palette_has_one_entry_per_action_with_its_tooltip():
    found = {c.action: c for c in commands(InspectorApp.BINDINGS)}
    assert found["step"].keys == ("space",)
    assert found["search_next"].keys == ("n",) and found["search"].keys == ("/",)
    assert found["help"].keys == ("?",)
    assert all(c.help and c.name for c in found.values())
    assert set(found) == {b.action for b in InspectorApp.BINDINGS}


def test_readme_key_list_names_every_binding():
    readme = (ROOT / "README.md").read_text()
    keys = re.search(r"^## Keys\n(.*?)\n## ", readme, re.S | re.M).group(1)  # the key table
    for b in InspectorApp.BINDINGS:
        if b.key == "ctrl+c":  # quits, as everywhere: not worth a word
            continue
        for key in b.key.split(","):
            assert f"`{key_name(key)}`" in keys, key
    assert f"`{InspectorApp.COMMAND_PALETTE_BINDING}`" in keys


@pytest.mark.asyncio
async def test_f_shows_the_others_below_the_workers_own_fds():
    """Unfolding once pushed the role's own fds below the panel (the others sort first by number)."""
    app = offline_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app, pilot, upto(session_batches(), "receive", "consumer"))
        view = app.query_one("#consumer-fds", FdTableView)
        ours = [r for r in view.panel.fds.rows if r.check is not None]
        others = [r for r in view.panel.fds.rows if r.check is None]
        assert ours and others
        await pilot.press("f")
        assert view.show_all
        lines = [ln.split() for ln in text_of(view).splitlines() if ln.strip()]
        numbers = [int(ln[0]) for ln in lines[1:] if ln and ln[0].isdigit()]
        assert numbers[: len(ours)][0] == next(r.fd for r in ours if r.kind == "received")
        assert set(numbers[: len(ours)]) == {r.fd for r in ours}
        assert set(numbers[len(ours) :]) == {r.fd for r in others}


@pytest.mark.slow
@pytest.mark.asyncio
async def test_consumer_tabs_follow_the_frame_shown_the_same_way_forward_and_back():
    """With 3 consumers a replay's tabs moved in different directions stepping forward and back."""
    from textual.widgets import TabbedContent

    app = offline_app(consumers=3)
    async with app.run_test(size=(160, 48)) as pilot:
        await feed(app, pilot, [e for b in session_batches(consumers=3) for e in b])
        tabs = app.query_one("#consumers", TabbedContent)
        forward = []
        for k in range(len(app.frames)):
            app.go(k)
            await pilot.pause()
            forward.append(tabs.active)
        assert len(set(forward)) == 3  # each consumer's steps bring its tab to the front
        for k in reversed(range(len(app.frames) - 1)):
            app.go(k)
            await pilot.pause()
            assert tabs.active == forward[k], k


@pytest.mark.asyncio
@pytest.mark.parametrize("replay", [False, True])
async def test_at_80x24_the_footer_shows_help_and_help_lists_every_key(replay):
    """The footer cuts what does not fit at 80 columns: ``?`` stays on it and names every key."""
    from vmmtui.record import gallery
    from vmmtui.tui.cast import plain, screen_ansi
    from vmmtui.tui.replay import ReplayApp

    app = ReplayApp(gallery.resolve("cpu-memfd-1mib")) if replay else offline_app()
    async with app.run_test(size=(80, 24)) as pilot:
        # the footer is drawn once the app has had the CPU for its first frame (later when the
        # machine is busy: four workers on two cores)
        await wait_for(pilot, lambda: plain(screen_ansi(app)).splitlines()[-1].strip() != "")
        footer = plain(screen_ansi(app)).splitlines()[-1]
        assert "? Help" in footer and "q Quit" in footer and "Next" in footer, footer
        await pilot.press("question_mark")
        await pilot.pause()
        source = app.screen.query_one(Markdown).source
        for c in commands(type(app).BINDINGS):
            assert f"| {c.key_text} | {c.help} |" in source


def test_the_verdicts_list_the_newest_findings_to_look_at_as_the_book_grows():
    """The verdicts read the findings that came since their last look, yet list exactly the newest
    twenty that are not good news at every frame, stepping back included, and at a book of
    another fold."""
    import random

    from vmmtui.tui.widgets.wire import VerdictsPanel
    from vmmtui.view.programs import Book, FindingView, ProgramsView

    rng = random.Random(3)
    panel = VerdictsPanel()
    book: Book[FindingView] = Book()
    found: list[FindingView] = []
    for n in range(1, 400):
        f = FindingView(rng.choice(["shared", "shared", "leak", "refused"]), n, "fd 3", "")
        found.append(f)
        book.add(n - 1, n, f)
        for length in (n, rng.randrange(n + 1)):  # live, then a frame stepped back to
            bad = [x for x in found[:length] if not x.good]
            v = ProgramsView(findings=book, findings_len=length, bad_findings=len(bad))
            assert panel._newest_bad(v, 20) == bad[-20:]
    other: Book[FindingView] = Book([(1, FindingView("leak", 9, "fd 4", ""))])
    v = ProgramsView(findings=other, findings_len=1, bad_findings=1)
    assert [f.pid for f in panel._newest_bad(v, 20)] == [9]


@pytest.mark.asyncio
async def test_home_end_and_arrows_go_through_the_live_apps_frames_as_a_replays_do():
    """The live app goes back and forth with the replay's keys: home to the start, ← and → one
    frame, end back to live; each frame past the start is marked "as of step N"."""
    app = offline_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await feed(app, pilot, upto(session_batches(), "receive", "consumer"))
        last = app.frames.last
        await pilot.press("home")
        await pilot.pause()
        assert app.shown == 0 and app.inspector.mark == "as of step 0"
        await pilot.press("right")
        await pilot.pause()
        assert app.shown == 1 and app.inspector.mark == "as of step 1"
        await pilot.press("left", "left")
        await pilot.pause()
        assert app.shown == 0  # the start is as far back as it goes
        await pilot.press("end")
        await pilot.pause()
        assert app.shown is None and app.inspector.mark == "" and app.frames.last == last


def test_the_wires_socket_path_breaks_after_a_slash_never_mid_name():
    """The wire's socket path folded at the panel's edge mid-name ('…/vmmtu' then 'i.sock')."""
    from vmmtui.tui.widgets.wire import at_slashes

    lines = at_slashes("/tmp/vmmtui-1273-b3czdq2m/vmmtui.sock (listening)", 32).splitlines()
    assert lines == ["/tmp/vmmtui-1273-b3czdq2m/", "vmmtui.sock (listening)"]
    assert at_slashes("/tmp/a.sock", 32) == "/tmp/a.sock"
