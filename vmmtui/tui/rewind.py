"""Draw the inspector's panels as they were after any frame of a Timeline.

Forward, the widgets get the events between two frames, as a live session would send them; back,
they are reset and fed every event up to the frame. Both call each widget's ``render_event``
directly, in one go (a step's redraw is one refresh, not thousands of queued messages). Used by the
replay app and by the live inspector's step back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import RichLog, TabbedContent

from vmmtui.record.timeline import Frame, Timeline
from vmmtui.steps import PRODUCER
from vmmtui.tui.messages import Reset, SessionEvent
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.teaching import TeachingPanel

if TYPE_CHECKING:
    from vmmtui.tui.app import InspectorApp


@dataclass
class LogBook:
    """What the event log held after each prefix of one timeline that rewind drew: stepping back
    cuts the log to that many lines instead of writing it all again."""

    timeline: Timeline
    #: the events the log shows now (as rewind drew them) and its line count then
    shown_end: int = 0
    shown_lines: int = 0
    #: events[:end] -> (lines, the kcmp repeats, consumers)
    marks: dict[int, tuple[int, dict[str, str], int | None]] = field(default_factory=dict)


_books: WeakKeyDictionary[EventLog, LogBook] = WeakKeyDictionary()


def feed(
    app: InspectorApp, timeline: Timeline, start: int, end: int, skip: Widget | None = None
) -> None:
    """Events ``start:end`` of the timeline to every widget that renders events, in order."""
    views = [v for v in app.views if v is not skip]
    log = next((v for v in views if isinstance(v, EventLog)), None)
    ends = {f.end for f in timeline.frames} if log is not None else set()
    for i in range(start, end):
        message = SessionEvent(timeline.events[i], False, timeline.is_closing(i))
        for view in views:
            handler = getattr(view, "render_event", None)
            if handler is not None:
                handler(message)
            else:  # a widget with another handler name: through its queue
                view.post_message(SessionEvent(timeline.events[i], False, timeline.is_closing(i)))
        if i + 1 in ends:  # the log after each frame: a later step back cuts it to there
            _note_log(log, timeline, i + 1)


def reset(app: InspectorApp, skip: Widget | None = None) -> None:
    for view in app.views:
        if view is skip:
            continue
        if hasattr(view, "reset"):
            view.reset()
        else:
            view.post_message(Reset())
        if isinstance(view, RichLog):
            view.clear()  # the log shows the events up to the frame, no more


def draw(app: InspectorApp, timeline: Timeline, index: int, shown: int | None) -> Frame:
    """The panels after frame ``index``, from frame ``shown`` (None: from nothing); returns the frame."""
    with app.batch_update():  # one repaint for the whole frame, not one per event
        return _draw(app, timeline, index, shown)


def _draw(app: InspectorApp, timeline: Timeline, index: int, shown: int | None) -> Frame:
    frame = timeline.frames[index]
    log = next((v for v in app.views if isinstance(v, EventLog)), None)
    if shown is not None and shown <= index:
        feed(app, timeline, timeline.frames[shown].end, frame.end)
    else:
        before = timeline.frames[index - 1].end if index > 0 else 0
        cut = _cut_log(log, timeline, frame.end)
        skip = log if cut else None
        reset(app, skip)
        feed(app, timeline, 0, before, skip)
        for view in app.query(
            FdTableView
        ):  # what was new or closed at an earlier step is not news now
            view.first_seen.clear()
            view.gone.clear()
            view.render_table()
        feed(app, timeline, before, frame.end, skip)
    if log is not None:
        _note_log(log, timeline, frame.end)
    mark_next(app, frame)
    return frame


def _book(log: EventLog, timeline: Timeline) -> LogBook | None:
    """The log's book for this timeline; None while its writes wait for a size (not counted yet)."""
    if log._deferred_renders:
        _books.pop(log, None)
        return None
    book = _books.get(log)
    if book is None or book.timeline is not timeline:
        book = _books[log] = LogBook(timeline)
    return book


def _note_log(log: EventLog, timeline: Timeline, end: int) -> None:
    book = _book(log, timeline)
    if book is not None:
        book.shown_end, book.shown_lines = end, len(log.lines)
        book.marks[end] = (len(log.lines), dict(log.repeats.last), log.consumers)


def _cut_log(log: EventLog | None, timeline: Timeline, end: int) -> bool:
    """Cut the log back to what it held after events[:end], when rewind drew it and nothing else wrote
    to it since; False when it must be written again."""
    book = _books.get(log) if log is not None else None
    if (
        book is None
        or book.timeline is not timeline
        or end > book.shown_end
        or end not in book.marks
        or len(log.lines) != book.shown_lines
        or log._start_line
        or log._deferred_renders
    ):
        return False
    lines, repeats, consumers = book.marks[end]
    del log.lines[lines:]
    log._line_cache.clear()
    log.virtual_size = Size(log.virtual_size.width, len(log.lines))
    log.repeats.last = dict(repeats)
    log.consumers = consumers
    log.refresh()
    log.scroll_end(animate=False, immediate=True)
    return True


def mark_next(app: InspectorApp, frame: Frame) -> None:
    """▶ on the step that runs next, its consumer's tab in front, the teaching text for it."""
    nxt = frame.next_step
    for role in app.roles:
        app.panel(role).set_next(nxt[1] if nxt and nxt[0] == role else None)
    if nxt and nxt[0] != PRODUCER and len(app.roles) > 2:
        app.query_one("#consumers", TabbedContent).active = f"tab-{nxt[0]}"
    if not frame.failed:
        app.query_one(TeachingPanel).show_step(nxt, finished=frame.finished)


def mark_panels(app: InspectorApp, note: str) -> None:
    """``as of step N`` under every panel's border ("" clears it)."""
    for widget in [
        *(app.panel(r) for r in app.roles),
        app.query_one("#wire"),
        app.query_one(TeachingPanel),
    ]:
        widget.border_subtitle = note
