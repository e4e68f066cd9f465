"""What the screen's shared panels show, from either source's state: one view type per panel.

The demo's workers and a trace's programs are processes alike; the wire and the verdicts panels
draw the same view type whichever source made the state. The demo's plan (its one socket, its
verification) fills the parts a session has; a trace's ledger (every transfer, the findings) the
parts a trace has. No Textual and no words here: the widgets word them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmmtui.backends.pattern import Verification
    from vmmtui.view.model import ScreenState, WireView
    from vmmtui.view.programs import ProgramsView


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
        """What a repaint compares: the panel is drawn again only when it changed."""
        v = self.programs
        if v is not None:
            return ("programs", v.transfers_len, v.in_flight, tuple(v.procs))
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
