"""A failed call as a fact: the error's code, the call that raised it and what it said.

A failure travels from a worker or the session through events and recordings to every renderer.
It carries no sentence of ours: its cause and fix are worded where it is drawn
(``vmmtui/words/troubleshooting.py``, by its code and call), so that a recording replayed by a
later vmmtui shows that version's words, and no layer below the renderers needs a wording.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Failure:
    """One failed call: the error's name (a CUresult name, an errno name or one of ours), the
    call that raised it, and what the call or the check said (its facts, such as a path or a
    size; the system's own message)."""

    code: str
    call: str
    message: str
    #: the cause and fix an older vmmtui recorded with the failure; read only for a code today's
    #: words do not know (``words.troubleshooting.worded``), never written by this version
    cause: str = ""
    fix: str = ""
    #: an FD_LEAK's facts: each fd still open after the worker's cleanup and what /proc says it
    #: points at (its message is the table it was read from, ``/proc/PID/fd``); the screen marks
    #: these fds ✗ and ``words.troubleshooting.said`` words them
    fds: dict[int, str] = field(default_factory=dict)

    def one_line(self) -> str:
        """``cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)``: the facts on one line, for
        an exception's text and a worker's log (the words come where it is drawn)."""
        text = f"{self.call}: {self.code}"
        if self.message and self.message != self.code:
            text += f" ({self.message})"
        return text


class StepError(Exception):
    """Raised inside a worker step; carries the Failure that the step report shows."""

    def __init__(self, failure: Failure):
        super().__init__(failure.one_line())
        self.failure = failure


def failure(code: str, call: str, message: str = "") -> Failure:
    """The failure of ``call`` with ``code``; its message is the code when the call said nothing."""
    return Failure(code=code, call=call, message=message or code)
