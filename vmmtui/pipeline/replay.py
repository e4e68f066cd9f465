"""A recording replayed: what storage read (``record/``), run through today's pipeline and in
today's words.

``record/`` reads and writes recordings and never runs the pipeline; whoever replays one comes
here. A trace's recording carries its findings in the words of the vmmtui that wrote it: the
ledger finds them again from the calls, as facts (``refold``), and a call that an older vmmtui
recorded as a refusal but is a capability probe is read as the probe it is (``reclassified``).

``vmmtui replay`` folds a trace's recording once: it reads it as recorded (``found_again=False``)
and ``trace_timeline`` runs it through the pipeline, keeping that fold's world and its keyframes
(``model.world``); the inspector, ``--step``, ``--notes``, the page, the text and Perfetto's file
all take that one timeline.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from vmmtui.record.calls import CallTimeline

if TYPE_CHECKING:
    from pathlib import Path

    from vmmtui.record.recording import Recording
    from vmmtui.stream.events import Event
    from vmmtui.stream.failures import Failure


def replayed(recording: Recording, found_again: bool = True) -> Recording:
    """The recording as the pipeline makes it today: a failure's words left to today's tables
    where they know its code (``facts_only``); a trace's probes, and its findings found again
    (``found_again``; False where the reader folds it itself, once: ``trace_timeline``)."""
    events = [facts_only(e) for e in recording.events]
    if recording.header.backend == "trace":
        from vmmtui.model.probes import reclassified

        events = list(reclassified(events))
        if found_again:
            from vmmtui.pipeline.session import refold

            events = refold(events)
    return replace(recording, events=events)


def facts_only(e: Event) -> Event:
    """A failure an older vmmtui recorded with its cause and fix as sentences, as this version
    makes it: its facts (code, call, message) alone where today's tables word that code, which
    they then do where it is drawn; the old words kept only for a code they no longer know."""
    from vmmtui.stream.events import SessionFailed, StepDone
    from vmmtui.words.troubleshooting import known

    def bare(f: Failure) -> Failure:
        return replace(f, cause="", fix="") if (f.cause or f.fix) and known(f.code, f.call) else f

    match e:
        case SessionFailed():
            return replace(e, failure=bare(e.failure))
        case StepDone() if e.report.failure is not None:
            return replace(e, report=replace(e.report, failure=bare(e.report.failure)))
    return e


def read(path: str | Path, found_again: bool = True) -> Recording:
    """The recording at ``path`` (storage's ``read``), replayed (``replayed``)."""
    from vmmtui.record.recording import read as stored

    return replayed(stored(path), found_again)


def resolve(arg: str, found_again: bool = True) -> Recording:
    """A path on disk or a gallery name, replayed (``replayed``); RecordingError with one line
    when it cannot be read."""
    from vmmtui.record.gallery import resolve as stored

    return replayed(stored(arg), found_again)


def trace_timeline(events: list[Event]) -> CallTimeline:
    """A trace recording's frames, its findings found again by the trace session (as the live
    trace found them, in today's words), folded once: the replay, its page, ``--step``, the
    text and Perfetto's file all take this one timeline, which keeps the fold's world and its
    keyframes (``CallTimeline.world_at``: the world at any frame)."""
    from vmmtui.pipeline.session import TraceSession

    session = TraceSession.replay(events, keyframes=True)
    marked = list(session.marked())
    timeline = CallTimeline([e for e, _ in marked], [call for _, call in marked])
    if session.keyframes is not None:
        timeline.kept(session.world, session.keyframes)
    return timeline
