"""Every frame of a replay drawn by the inspector itself, headless, as SVG: for ``--html``.

The replay app runs with Textual's headless driver at a fixed size; each frame is drawn as the
``→`` key draws it (``ReplayApp.goto``), then exported as the SVG screenshot ``s`` would save.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from vmmtui.record import Recording, Timeline
from vmmtui.record.notes import Notes
from vmmtui.render.page import PageFrame, build
from vmmtui.stream.names import shown
from vmmtui.tui.keys import page_keys
from vmmtui.tui.replay import ReplayApp
from vmmtui.words.log import log_text

if TYPE_CHECKING:
    from vmmtui.record.calls import CallTimeline

#: the page's terminal: 120 columns, so that a frame as wide as a 1024 px screen has text of
#: 12 px or more (a 160-column frame had 5 px); 38 rows: the whole frame, the keys and the note
#: fit a 1024×768 screen at that size (48 did not: the keys and the note were below the fold)
SIZE = (120, 38)


class DrawingError(RuntimeError):
    """The frames could not all be drawn; one line saying which and why."""


def draw_frames(
    recording: Recording,
    notes: Notes | None = None,
    size: tuple[int, int] = SIZE,
    folded: CallTimeline | None = None,
) -> tuple[list[PageFrame], list[str], int | None]:
    """The frames, the event log's lines, and the signal (SIGINT, SIGTERM, SIGHUP) that stopped the drawing, if one did
    (the app is left between two frames, so that it closes as it should); DrawingError when a
    frame could not be drawn or the app ended before its last frame."""
    app = ReplayApp(recording, notes=notes, folded=folded)
    frames: list[PageFrame] = []
    log: list[str] = []
    stopped: list[int] = []
    failed: list[str] = []
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {s: signal.signal(s, lambda signum, _: stopped.append(signum)) for s in signals}

    async def every_frame(pilot) -> None:
        # the page has its own keys line (from the binding table) and its own event log, which
        # scrolls: the frames leave out the terminal's footer and log
        app.inspector.add_class("-page")
        await pilot.pause()
        for k, f in enumerate(app.timeline.frames):
            if stopped:
                break
            try:
                app.goto(k)
                await pilot.pause()
                plan = app.timeline.plan
                role = plan[f.steps - 1][0] if f.steps and not f.closing and plan else ""
                note = notes.at(k) if notes else None
                frames.append(
                    PageFrame(
                        app.export_screenshot(),
                        f.label,
                        f.steps,
                        role,
                        f.failed,
                        None if note is None else (note.label, note.shown),
                        app.frames.at(k).log_len,
                    )
                )
            except Exception as exc:  # noqa: BLE001 - said in one line, never a traceback
                failed.append(f"frame {k} ({f.label}): {type(exc).__name__}: {exc}")
                break
        log.extend(log_text(line).plain for line in app.frames.at(app.frames.last).log_lines())
        app.exit(0)

    try:
        app.run(headless=True, size=size, auto_pilot=every_frame)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
    # the app may take the signals itself (Viewer.stop): then it says which one ended it
    signalled = stopped[0] if stopped else app.signalled
    if failed:
        raise DrawingError(f"could not draw {failed[0]}")
    if signalled is None and len(frames) < len(app.timeline.frames):
        raise DrawingError(f"the replay ended after {len(frames)} of {len(app.timeline)} frames")
    return frames, log, signalled


def steps_of(recording: Recording, folded: CallTimeline | None = None) -> int:
    """How many steps the page's bar counts: the plan's, or a trace's calls (``folded``: its
    one fold, where the caller has it)."""
    from vmmtui.pipeline.replay import trace_timeline
    from vmmtui.tui.replay import is_trace_recording

    if is_trace_recording(recording):
        return (folded or trace_timeline(recording.events)).frames[-1].steps
    return len(Timeline(recording.events).plan)


def write_page(
    path: str, recording: Recording, notes: Notes | None = None, folded: CallTimeline | None = None
) -> tuple[int, int, int | None]:
    """Write the page: (frames, bytes, None); or, stopped by a signal, nothing: (0, 0, signal).
    A trace is folded once (``folded``, or here): the frames and the bar's count share it."""
    from vmmtui.pipeline.replay import trace_timeline
    from vmmtui.tui.replay import is_trace_recording

    if folded is None and is_trace_recording(recording):
        folded = trace_timeline(recording.events)
    frames, log, stopped = draw_frames(recording, notes, folded=folded)
    if stopped is not None:
        return 0, 0, stopped
    h = recording.header
    page = build(
        frames,
        title=shown(f"{h.where} · {h.driver or h.backend} · {h.when}"),
        subtitle=shown(notes.title if notes and notes.title else h.label),
        steps=steps_of(recording, folded),
        keys=page_keys(),
        log=log,
    )
    data = page.encode("utf-8")
    from vmmtui.system.atomic import write_whole

    write_whole(path, data)  # whole or not at all: a full disk leaves no half a page
    return len(frames), len(data), None
