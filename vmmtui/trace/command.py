"""The command a trace starts (``vmmtui trace -- CMD``, ``watch``): why it could not start, and
how it ended, for the eBPF tracer and the polling alike."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass


class CommandNotFound(Exception):
    """The command could not be started: ``code`` is 127 (not found) or 126 (not executable)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Exit:
    """How the command ended, as its parent's wait said: an exit code, or a signal's name."""

    code: int | None
    signal: str | None

    @property
    def status(self) -> int:
        """The exit status vmmtui passes on: the code, or 128 + the signal."""
        if self.signal:
            return 128 + int(signal.Signals[self.signal])
        return self.code or 0

    @classmethod
    def of_status(cls, status: int) -> Exit:
        """From a wait status (``os.waitpid``)."""
        if os.WIFSIGNALED(status):
            return cls(None, signal.Signals(os.WTERMSIG(status)).name)
        return cls(os.WEXITSTATUS(status), None)
