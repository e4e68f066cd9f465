"""Recordings of sessions (header + event stream), their timeline of frames, and the gallery.

No Textual here: the replay app (vmmtui/tui/replay.py) and the live inspector's step back build
on ``Timeline``.
"""

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
