"""One driver or system call as a worker made it: the record every renderer shows under a step.

A backend times and records its calls (``backends.base.CallLog``); the step report carries them
to the session, the events and recordings, so the record lives here, with the stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Call:
    """One driver or system call as the inspector shows it: name, arguments, result, duration."""

    name: str
    args: dict[str, Any]
    result: str
    duration_ns: int
    ok: bool = True
