"""A recording replayed: what storage read (``record/``), run through today's pipeline.

``record/`` reads and writes recordings and never runs the pipeline; whoever replays one comes
here. A trace's recording carries its findings in the words of the vmmtui that wrote it: the
ledger finds them again from the calls, as facts (``refold``), and a call that an older vmmtui
recorded as a refusal but is a capability probe is read as the probe it is (``reclassified``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from vmmtui.record.calls import CallTimeline

if TYPE_CHECKING:
    from pathlib import Path

    from vmmtui.record.recording import Recording
    from vmmtui.stream.events import Event


def replayed(recording: Recording) -> Recording:
    """The recording as the pipeline makes it today: a trace's probes and findings found again;
    a session's events as they were recorded."""
    if recording.header.backend != "trace":
        return recording
    from vmmtui.model.probes import reclassified
    from vmmtui.pipeline.session import refold

    return replace(recording, events=refold(reclassified(recording.events)))


def read(path: str | Path) -> Recording:
    """The recording at ``path`` (storage's ``read``), replayed (``replayed``)."""
    from vmmtui.record.recording import read as stored

    return replayed(stored(path))


def resolve(arg: str) -> Recording:
    """A path on disk or a gallery name, replayed (``replayed``); RecordingError with one line
    when it cannot be read."""
    from vmmtui.record.gallery import resolve as stored

    return replayed(stored(arg))


def trace_timeline(events: list[Event]) -> CallTimeline:
    """A trace recording's frames, its findings found again by the trace session (as the live
    trace found them, in today's words): the replay, its page and ``--step`` count these."""
    from vmmtui.pipeline.session import TraceSession

    marked = list(TraceSession.replay(events).marked())
    return CallTimeline([e for e, _ in marked], [call for _, call in marked])
