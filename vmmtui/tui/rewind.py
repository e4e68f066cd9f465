"""Draw the inspector's panels as they were after any frame of a Timeline.

Forward, the widgets get the events between two frames, as a live session would send them; back,
they are reset and fed every event up to the frame. Both call each widget's ``render_event``
directly, in one go (a step's redraw is one refresh, not thousands of queued messages). Used by the
replay app and by the live inspector's step back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import RichLog, TabbedContent

from vmmtui.record.timeline import Frame, Timeline
from vmmtui.steps import PRODUCER
from vmmtui.tui.messages import Reset, SessionEvent
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.teaching import TeachingPanel

if TYPE_CHECKING:
    from vmmtui.tui.app import InspectorApp


def feed(app: InspectorApp, timeline: Timeline, start: int, end: int) -> None:
    """Events ``start:end`` of the timeline to every widget that renders events, in order."""
    views = app.views
    for i in range(start, end):
        message = SessionEvent(timeline.events[i], False, timeline.is_closing(i))
        for view in views:
            handler = getattr(view, "render_event", None)
            if handler is not None:
                handler(message)
            else:  # a widget with another handler name: through its queue
                view.post_message(SessionEvent(timeline.events[i], False, timeline.is_closing(i)))


def reset(app: InspectorApp) -> None:
    for view in app.views:
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
    if shown is not None and shown <= index:
        feed(app, timeline, timeline.frames[shown].end, frame.end)
    else:
        before = timeline.frames[index - 1].end if index > 0 else 0
        reset(app)
        feed(app, timeline, 0, before)
        for view in app.query(FdTableView):  # what was new or closed at an earlier step is not news now
            view.first_seen.clear()
            view.gone.clear()
            view.render_table()
        feed(app, timeline, before, frame.end)
    mark_next(app, frame)
    return frame


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
    for widget in [*(app.panel(r) for r in app.roles), app.query_one("#wire"), app.query_one(TeachingPanel)]:
        widget.border_subtitle = note
