"""Textual messages: session events from worker threads to the app, and from the app to each widget.

The app turns every event into one ``SessionEvent`` per widget that renders events (``EventView``);
each widget handles the events it owns with ``@on(SessionEvent)``. A widget's queue is first in,
first out, so it sees the events in the session's order; ``Drain`` lets the app wait until every
widget has rendered what it was sent (the ``--screenshots`` picture is taken after that).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from textual.message import Message

from vmmtui.events import Event


@dataclass
class SessionEvents(Message):
    """Events from a step, a start or a close, in order (worker thread → app)."""

    events: list[Event]
    generation: int
    #: events of ``close()``: the session is gone, exits are no news
    closing: bool = False
    #: after these events the widgets are reset and a fresh session starts (ctrl+r)
    restart: bool = False


@dataclass
class FdRefresh(Message):
    """A live 4 Hz read of every fd table; a newer one replaces an unprocessed older one."""

    events: list[Event]
    generation: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FdRefresh)


class SessionEvent(Message, bubble=False):
    """One event for one widget (app → widget); it does not bubble, so no parent renders it twice."""

    def __init__(self, event: Event, live: bool = False, closing: bool = False):
        super().__init__()
        self.event = event
        #: from the 4 Hz refresh rather than a step
        self.live = live
        #: from the session's close
        self.closing = closing


class Reset(Message, bubble=False):
    """Forget the last session (ctrl+r): queued behind that session's last events."""


class Drain(Message, bubble=False):
    """Answered once every message queued before it has been handled."""

    def __init__(self, done: asyncio.Event):
        super().__init__()
        self.done = done


class EventView:
    """Mixin for widgets that render session events: answers Drain, and Reset through ``reset()``.

    (Named handlers: Textual collects ``@on`` handlers only from its own classes, not from mixins.)
    """

    def reset(self) -> None:
        """Back to the state before any session event."""

    def on_reset(self, message: Reset) -> None:
        self.reset()

    def on_drain(self, message: Drain) -> None:
        message.done.set()


@dataclass
class StepChosen(Message):
    """A past step picked in a step list or the event log (widget → app): show the panels as of it."""

    #: the N of "as of step N": how many steps of the plan had run
    steps: int
