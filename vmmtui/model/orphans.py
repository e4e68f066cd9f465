"""Holds after an exporter ended wait one teardown window before they are said.

When a process that made or exported memory ends while others still pin it (a memfd, a /dev/shm
file, a VMM import or mapping, a legacy IPC open, a pool pointer), the world knows at once; but
a healthy shutdown ends both sides in one teardown, each on its own clock (a Chromium renderer
let go up to 154.5 ms after its browser; two NCCL ranks 0.41 s apart). So the hold's
``held-after-exporter-died`` waits here ``policy.TEARDOWN_WINDOW_S`` from the exporter's end:

- let go inside the window: the end is said as the fact it is (``released-after-exporter-died``,
  counted "let go within the teardown window", ``model/pins.py``), and nothing else;
- still held when the window has passed (the next event or tick of the trace's clock after it,
  once a second under eBPF): ``held-after-exporter-died`` is said then, live, its ``since`` the
  exporter's end and its ``ktime`` now, so the policy weighs it as orphaned; its end, later, is
  said in the past;
- still held when the trace ends inside the window: said with how long it had lasted, a fact.

Only data is kept (a keyframe's deep copy of the world copies it whole); which pin still holds is
asked of the ledger when the window has passed. No words, no clock of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from vmmtui.model.policy import LET_GO, TEARDOWN_WINDOW_NS
from vmmtui.stream.observed import LedgerFinding

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger


@dataclass
class Waiting:
    """One hold waiting its window: the finding to say, when it is due, since when the holder
    had the memory (records lost since then make it ``unknown``), and how its end is seen: the
    ledger's ``after_death`` entry (``key``), else the holder's fd still naming the file."""

    due: int
    since: int
    finding: LedgerFinding
    key: tuple[int, str] | None = None
    fd: int = -1
    file: str = ""


@dataclass
class Orphans:
    """The holds waiting, and the first time one of them is due."""

    window_ns: int = TEARDOWN_WINDOW_NS
    waiting: list[Waiting] = field(default_factory=list)
    next_due: int = 0

    def wait(
        self,
        f: LedgerFinding,
        since: int,
        key: tuple[int, str] | None = None,
        fd: int = -1,
        file: str = "",
    ) -> None:
        """Hold ``f`` (a ``held-after-exporter-died`` whose ``since`` is the exporter's end) for
        one window."""
        w = Waiting(f.since + self.window_ns, since, f, key, fd, file)
        self.waiting.append(w)
        self.next_due = min(self.next_due, w.due) if len(self.waiting) > 1 else w.due

    def due(self, ledger: Ledger, now: int, out: list) -> None:
        """The holds whose window has passed by ``now``: each still held said, live."""
        if not self.waiting or now < self.next_due:
            return
        keep: list[Waiting] = []
        for w in self.waiting:
            if w.due > now:
                keep.append(w)
            elif _held(ledger, w):
                out.append(ledger.unknown_if_lost(replace(w.finding, ktime=now), w.since))
            elif w.key is None:  # no end of its own to say: the hold, short, as the fact it is
                out.append(replace(w.finding, ktime=w.finding.since, how=LET_GO))
        self.waiting = keep
        self.next_due = min((w.due for w in keep), default=0)

    def finish(self, ledger: Ledger, at: int, out: list) -> None:
        """The end of the trace: each hold still waiting said with how long it had lasted (inside
        the window: a fact; past it, where no event came to say so, orphaned)."""
        for w in self.waiting:
            end = max(at, w.finding.since)
            if _held(ledger, w):
                out.append(ledger.unknown_if_lost(replace(w.finding, ktime=end), w.since))
            elif w.key is None:
                out.append(replace(w.finding, ktime=w.finding.since, how=LET_GO))
        self.waiting = []
        self.next_due = 0


def _held(ledger: Ledger, w: Waiting) -> bool:
    """Whether the hold ``w`` is about still pins the memory: its ``after_death`` entry is still
    there (every pin's end removes it, ``pins.after_death_over``), or its holder is alive with its
    fd still naming the file."""
    pid = w.finding.pid
    if not ledger.alive(pid):
        return False
    if w.key is not None:
        held = ledger.after_death.get(w.key)
        return held is not None and held.died_at == w.finding.since
    h = ledger.holdings.get((pid, w.fd))
    return h is not None and (not w.file or h.file == w.file)
