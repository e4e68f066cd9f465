"""How a process ended, computed once from what the kernel or the parent's wait said: an exit
code, or the signal that killed it. Every renderer words this one value (``trace/words.py``)."""

from __future__ import annotations

import signal as signals
from dataclasses import dataclass


@dataclass(frozen=True)
class End:
    """``code`` the exit status (``exit(5)``: 5) or None when a signal ended it; ``signal`` the
    signal's number (0: none)."""

    code: int | None
    signal: int = 0

    @classmethod
    def of_status(cls, status: int) -> End:
        """From a wait status (``ProcessExit.code``: the kernel's ``exit_code``)."""
        if status & 0x7F:
            return cls(None, status & 0x7F)
        return cls(status >> 8 & 0xFF)

    @classmethod
    def of_returncode(cls, returncode: int | None) -> End | None:
        """From Python's ``returncode`` (negative: the signal), None when not known."""
        if returncode is None:
            return None
        if returncode < 0:
            return cls(None, -returncode)
        return cls(returncode)

    @classmethod
    def of_exit(cls, code: int | None, signal: str | None) -> End | None:
        """From an exit code or a signal's name (``SIGKILL``), as a parent's wait saw them."""
        if signal:
            try:
                return cls(None, signals.Signals[signal].value)
            except KeyError:  # a name this Python does not know: the code, if any, is said
                pass
        return cls.of_returncode(code)
