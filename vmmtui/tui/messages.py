"""Textual messages: what the session threads tell the app (they touch no widget), and what a widget
tells the app (a past step picked)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from vmmtui.stream.events import Event


@dataclass
class SessionEvents(Message):
    """Events from a step, a start or a close, in order (session thread → app)."""

    events: list[Event]
    generation: int
    #: events of ``close()``: the session is gone, exits are no news
    closing: bool = False
    #: what follows these events: "" (nothing), "restart" (a fresh session), "quit"
    then: str = ""
    #: False: more steps of the same run follow (``r``), the app stays busy
    last: bool = True
    #: the events of a start that succeeded
    started: bool = False


@dataclass
class StepRunning(Message):
    """The session thread is about to run ``role``'s ``step`` (its events come when it is done)."""

    role: str
    step: str
    generation: int


@dataclass
class FdRefresh(Message):
    """A live 4 Hz read of every fd table, made between steps (``epoch``: the steps launched then)."""

    events: list[Event]
    generation: int
    epoch: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FdRefresh)


@dataclass
class StartFailed(Message):
    """The session did not start; ``refused``: the user's input cannot run here (exit 2)."""

    text: str
    generation: int
    refused: bool = False


@dataclass
class SessionError(Message):
    """A step or a read broke in the session thread: said on screen, never a traceback."""

    text: str
    generation: int


@dataclass
class StepChosen(Message):
    """A past step picked in a step list or the event log (widget → app): show the panels as of it."""

    #: the N of "as of step N": how many steps of the plan had run
    steps: int


@dataclass
class Interrupted(Message):
    """SIGINT, SIGTERM or SIGHUP arrived (signal handler → app)."""

    signum: int
