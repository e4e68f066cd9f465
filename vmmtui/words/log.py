"""The event log's entries in words: the fold keeps each entry as data (``view.model.LogEntry``:
the event and what its words need), and the log, a search or a page words it here, once."""

from __future__ import annotations

from rich.text import Text

from vmmtui.stream.events import (
    KcmpVerdict,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.view.model import LogEntry, LogLine, Where
from vmmtui.words import narration as say


def log_text(line: LogLine) -> Text:
    """The entry's words, its lines one under the other (none: an empty text), made once."""
    if line.said is None:
        object.__setattr__(line, "said", Text("\n").join(entry_lines(line.entry)))
    return line.said


def entry_lines(x: LogEntry) -> list[Text]:
    """The lines an entry says."""
    if x.where == Where.APP:
        if x.note is not None:
            return [x.note]
        return [Text(f"could not start: {x.start_error}", style="bold red")]
    if x.where == Where.KERNEL:
        return _kernel(x)
    if x.where == Where.PROGRAM:
        return _program(x)
    return _session(x)


def tagged(role: str, text: Text) -> Text:
    """A line of one worker: its role's first letters, in its colour, then the line."""
    return Text(f"{role[:4]} ", style=say.role_style(role)) + text


def _session(x: LogEntry) -> list[Text]:
    e, d = x.event, x.display
    match e:
        case SessionStarted():
            return say.started(e, d)
        case WorkerStarted():
            return [tagged(e.role, say.worker_started(e, d))]
        case StepDone():
            r = e.report
            return [tagged(r.role, say.call(c, d)) for c in r.calls] + [
                tagged(r.role, say.log_line(line, d)) for line in r.log
            ]
        case WorkerExited():
            return [tagged(e.role, say.exited(e, d))] + [
                tagged(e.role, t) for t in say.log_tail(e, d)
            ]
        case SessionFailed():
            return say.failed(e, d)
        case SessionFinished():
            return [say.finished(e, x.consumers)]
        case SessionClosed():
            return [say.closed(e, d)]
        case Notice():
            return [say.notice(e, d)]
        case ScenarioOutcome():
            return [say.outcome(e)]
        case KcmpVerdict():
            return [tagged(say.KERNEL, say.kcmp_line(e))]
    return []


def _program(x: LogEntry) -> list[Text]:
    from vmmtui.stream.observed import TraceCall, TraceEvent
    from vmmtui.words import trace as trace_say

    e = x.event
    if isinstance(e, TraceCall):
        return trace_say.lines(e, x.t0, x.comm)[:1]
    if isinstance(e, TraceEvent):
        return trace_say.lines(e, x.t0)
    return say.attach_lines(e, x.display) if e is not None else []


def _kernel(x: LogEntry) -> list[Text]:
    from vmmtui.stream.observed import TraceFinished, TraceStarted
    from vmmtui.words import trace as trace_say

    e, d = x.event, x.display
    if x.fact is not None:
        text = trace_say.kernel_fact(x.fact)
    elif isinstance(e, TraceStarted):
        text = trace_say.kernel_started(e, x.roles)
    elif isinstance(e, TraceFinished):
        text = trace_say.kernel_finished(e)
    else:
        return []
    if text.plain.startswith("kernel: "):  # the log's tag says it
        text = text[len("kernel: ") :]
    if d.stable:
        text = Text(d.text(text.plain), text.style)
    return [tagged(say.KERNEL, text)]
