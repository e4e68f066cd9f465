"""Recordings of sessions (header + event stream), their timeline of frames, and the gallery.

No Textual here: the replay app (vmmtui/tui/replay.py) and the live inspector's step back build
on ``Timeline``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vmmtui.record.recording import (
        FORMAT,
        Header,
        Recorder,
        Recording,
        RecordingError,
        make_header,
        read,
    )
    from vmmtui.record.timeline import Frame, Timeline

#: each name from its module on first use: the live inspector's first frame needs the timeline
#: (step back), not the recording's reader and writer (gzip, the trace events)
_WHERE = {
    **dict.fromkeys(
        ("FORMAT", "Header", "Recorder", "Recording", "RecordingError", "make_header", "read"),
        "vmmtui.record.recording",
    ),
    "Frame": "vmmtui.record.timeline",
    "Timeline": "vmmtui.record.timeline",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMAT",
    "Frame",
    "Header",
    "Recorder",
    "Recording",
    "RecordingError",
    "Timeline",
    "make_header",
    "read",
]
