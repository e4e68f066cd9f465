"""What the session tests share: a scenario's whole session on the memfd backend, and the
answers read from its events."""

from __future__ import annotations

from vmmtui.plan.config import SessionConfig
from vmmtui.session import Session
from vmmtui.stream.events import Event, SessionClosed, StepDone
from vmmtui.stream.state import StepReport


def run_scenario(tmp, name: str, **kw) -> tuple[Session, list[Event]]:
    """The scenario ``name`` run to its end in real workers (memfd, 1 MiB, sockets under
    ``tmp``); ``kw``: more of the session's options. The session and every event it made."""
    s = Session(SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp), scenario=name, **kw))
    return s, s.lifetime()


def report(events: list[Event], role: str, step: str) -> StepReport:
    """What ``role``'s worker reported of ``step`` (the plan's steps, not the start's)."""
    return next(
        e.report
        for e in events
        if isinstance(e, StepDone)
        and e.index >= 0
        and (e.report.role, e.report.step) == (role, step)
    )


def closed_clean(events: list[Event]) -> bool:
    """Whether the session's last close found nothing left behind."""
    return [e for e in events if isinstance(e, SessionClosed)][-1].clean
