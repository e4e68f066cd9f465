"""What the screen's panels show, from either source's state: one view type per panel.

The demo's workers and a trace's programs are processes alike: the process, the wire and the
verdicts panels each draw one view type whichever source made the state. The demo's plan (its one socket, its
verification) fills the parts a session has; a trace's ledger (every transfer, the findings) the
parts a trace has. No Textual and no words here: the widgets word them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmmtui.stream.values import Verification
    from vmmtui.view.model import PanelView, ScreenState, WireView
    from vmmtui.view.programs import ProcView, ProgramsView


@dataclass(frozen=True)
class PlanLayer:
    """The plan over a worker's process: its steps (``plan``, the whole plan in order), the one
    it runs next (None: not this worker's turn), how the memory is shared and the fd travels."""

    plan: tuple[tuple[str, str], ...]
    next_step: str | None
    mechanism: str
    transport: str


@dataclass(frozen=True)
class ProcessPanelView:
    """One process on screen: who it is (``name``, ``pid``) and what it holds. A worker of the
    session (``worker``) has its declared fds (checked against /proc), its allocation and
    mapping, and the plan over it (``plan``, ``front``: the consumer on show); a program vmmtui
    did not start (``program``) has its fds, memory and calls as the trace saw them
    (``programs``: who pins what, the calls, the colours)."""

    name: str
    pid: int | None
    worker: PanelView | None = None
    plan: PlanLayer | None = None
    front: str | None = None
    program: ProcView | None = None
    programs: ProgramsView | None = None


def process_view(state: ScreenState, who: str | int) -> ProcessPanelView:
    """The panel of ``who`` (a worker's role, or a traced process's pid) in ``state``."""
    v = state.programs
    if v is not None and isinstance(who, int):
        p = v.proc(who)
        return ProcessPanelView(p.name, p.pid, program=p, programs=v)
    role = str(who)
    panel = state.panel(role)
    nxt = state.next_step
    plan = PlanLayer(
        state.plan,
        nxt[1] if nxt and nxt[0] == role else None,
        state.mechanism,
        state.transport,
    )
    front = state.front or (state.roles[1] if len(state.roles) > 1 else None)
    return ProcessPanelView(role, panel.pid, worker=panel, plan=plan, front=front)


@dataclass(frozen=True)
class WirePanelView:
    """What went between processes: the session's socket (``session``: its peer, metadata, the fd
    in flight, kcmp, the ACK) or, for programs vmmtui did not start, every transfer seen and what
    is still in flight (``programs``)."""

    session: WireView | None = None
    mechanism: str = "vmm"
    consumers: int = 0
    programs: ProgramsView | None = None

    @property
    def key(self) -> tuple:
        """What a repaint compares: the panel is drawn again only when it changed. A transfer's
        row changes after it came too: its handle type at import once the receiver imports it
        (each process's memory) and what the ledger found of it (the findings)."""
        v = self.programs
        if v is not None:
            memory = tuple(len(p.mems) for p in v.procs.values())
            return (
                "programs",
                v.transfers_len,
                v.in_flight,
                tuple(v.procs),
                memory,
                v.findings_len,
            )
        return ("session", self.session, self.mechanism, self.consumers)


@dataclass(frozen=True)
class VerdictsView:
    """What was checked and what it found: the session's verification of the data
    (``verification``, None before it ran) or the ledger's findings on the programs
    (``programs``: the findings, the records lost, a polling's reason)."""

    verification: Verification | None = None
    programs: ProgramsView | None = None

    @property
    def key(self) -> tuple:
        v = self.programs
        if v is not None:
            return ("programs", v.findings_len, v.lost, v.finished, v.mode)
        return ("session", self.verification)


def wire_view(state: ScreenState) -> WirePanelView:
    """The wire panel's view of ``state``, whichever source made it."""
    if state.programs is not None:
        return WirePanelView(programs=state.programs)
    return WirePanelView(state.wire, state.mechanism, len(state.roles) - 1)


def verdicts_view(state: ScreenState) -> VerdictsView:
    """The verdicts panel's view of ``state``, whichever source made it."""
    if state.programs is not None:
        return VerdictsView(programs=state.programs)
    return VerdictsView(verification=state.verification)
