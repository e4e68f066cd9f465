"""Textual messages that carry session events from worker threads to the UI."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from vmmtui.events import Event


@dataclass
class SessionEvents(Message):
    """Events from a step, a start or a close, in order."""

    events: list[Event]
    generation: int


@dataclass
class FdRefresh(Message):
    """A live 4 Hz read of both fd tables; a newer one replaces an unprocessed older one."""

    events: list[Event]
    generation: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, FdRefresh)
