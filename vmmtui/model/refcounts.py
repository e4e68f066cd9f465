"""The refcount book beside the ledger: after the ledger folds an event, ``Refcounts.fold`` feeds
the same event to the book (``model/handles.py``), words its facts (``trace/words.py``) into the
ledger's findings, names the road of each share and import (``model/share_roads.py``), and hands the
exporters' pinned bytes that changed as ``PinnedBytes`` events. A failed call the book explains
(a second release, a legacy export of VMM memory, a second open refused as already mapped) is
said by the book alone, not also as a bare refusal. ``TraceSession`` runs it on every event, so
a live trace, its recording and Perfetto's export fold alike."""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import replace
from typing import TYPE_CHECKING

from vmmtui.model.entries import HeldAfterDeath
from vmmtui.model.findings import FindingKind
from vmmtui.model.handles import NEVER_IMPORTED_S, HandleBook, HandleFact, Pinned
from vmmtui.model.share_roads import with_road
from vmmtui.stream.events import Event
from vmmtui.stream.observed import (
    CapabilityProbe,
    CudaCall,
    LedgerFinding,
    PinnedBytes,
    ProcessExit,
    base_name,
)

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger

CUDA_SUCCESS = 0


class Refcounts:
    """The book of one run, fed after the ledger (whose state links an import to its export)."""

    def __init__(self, ledger: Ledger, never_imported_s: float = NEVER_IMPORTED_S) -> None:
        self.ledger = ledger
        self.book = HandleBook(self.export_of_import, never_imported_s, self.export_pins)
        #: the open files an exiting process held just before its exit closed them: an export
        #: whose fd it kept until then pinned memory until then (said at the exit, live or
        #: replayed alike)
        self._held_at_exit: set[str] = set()

    def before_exit(self, e: ProcessExit) -> None:
        """Called before the ledger folds an exit: what the exit is about to close is noted (for
        ``fold`` of the same exit only)."""
        ledger = self.ledger
        self._held_at_exit = {
            ledger.holdings[(e.pid, fd)].file or f"fd:{e.pid}:{fd}" for fd in ledger.fds_of(e.pid)
        }

    def export_pins(self, pid: int, handle: int) -> bool:
        """Whether a copy of an fd the allocation was exported as is open in some process (the
        exporter's, one in flight, a receiver's): the export then pins the memory by itself.
        An allocation the ledger does not know is taken to pin (nothing is cleared unseen)."""
        a = self.ledger.allocations.get((pid, handle))
        if a is None or not a.exported:
            return True
        for fd, file in a.exported:
            if file and (file in self._held_at_exit or self.ledger.holders(file)):
                return True
            if not file and (
                (pid, fd) in self.ledger.holdings or f"fd:{pid}:{fd}" in self._held_at_exit
            ):
                return True
        return False

    def export_of_import(self, pid: int, handle: int) -> tuple[int, int] | None:
        """The allocation (exporter pid, handle) the ledger matched an import of ``pid`` to."""
        a = self.ledger.imports.get((pid, handle), (None, None))[0]
        return (a.pid, a.handle) if a is not None else None

    def fold(
        self, e: Event, found: list[LedgerFinding | CapabilityProbe]
    ) -> list[LedgerFinding | CapabilityProbe | PinnedBytes]:
        """``found`` (what the ledger made of ``e``) with roads, less a refusal the book words
        itself, then the book's findings and the pinned bytes that changed. Most events (closes,
        memfds, sends) bring nothing to either: they leave after three tests (this runs on every
        event of a trace, tens of thousands a second)."""
        if not found and not self.book.waiting() and not isinstance(e, (CudaCall, ProcessExit)):
            return []
        explained = isinstance(e, CudaCall) and e.result != CUDA_SUCCESS and self._explains(e)
        out: list[LedgerFinding | CapabilityProbe | PinnedBytes] = []
        for f in found:
            if isinstance(f, LedgerFinding):
                if explained and f.kind == "refused":
                    _swap(self.ledger.findings, f, None)
                    continue
                road = with_road(self.ledger, e, f)
                if road is not f:
                    _swap(self.ledger.findings, f, road)
                f = road
            out.append(f)
        facts: list[HandleFact] = []
        pins: list[Pinned] = []
        if isinstance(e, CudaCall):
            facts, pins = self.book.call(
                base_name(e.func), e.pid, e.ktime, e.result, handle=e.handle, ptr=e.ptr,
                size=e.size, fd=e.fd, handle_types=e.handle_types, ipc=e.ipc,
            )  # fmt: skip
        elif isinstance(e, ProcessExit):
            facts, pins = self.book.exit(e.pid, e.ktime)
            self._held_at_exit = set()
        if self.ledger.clock:
            facts += self.book.clock(self.ledger.clock)
        if isinstance(e, ProcessExit):
            facts = self._orphaned(e, facts)
        said = self._said(facts)
        return [*out, *said, *(PinnedBytes(p.pid, p.ktime, p.bytes, p.buffers) for p in pins)]

    def _orphaned(self, e: ProcessExit, facts: list[HandleFact]) -> list[HandleFact]:
        """The book's holds of a dead exporter's memory (a mapping kept after its import was
        released) wait one teardown window in the ledger (``model/orphans.py``) like the
        ledger's own, their end said by the mapping's (``pins.import_gone``)."""
        ledger, rest = self.ledger, []
        for f in facts:
            if f.kind != FindingKind.HELD_AFTER_EXPORTER_DIED:
                rest.append(f)
                continue
            m = ledger.mappings.get((f.pid, f.key))
            if m is None:  # a mapping the ledger does not know: said now, its length not known
                rest.append(replace(f, since=0))
                continue
            key = (f.pid, f"handle:{m.handle:x}")
            if key not in ledger.after_death:
                # named as the book's finding names it (the mapping's base), so its end is its
                ledger.after_death[key] = HeldAfterDeath(
                    f.pid, f.peer, e.ktime, e.code, str(f.thing), handle=f.key, size=f.size
                )  # fmt: skip
            finding = replace(finding_of(f), since=e.ktime, status=e.code)
            ledger.orphans.wait(finding, f.since, key=key)
        return rest

    def finish(self, at: int = 0) -> list[LedgerFinding]:
        """What the end says: exports nobody opened."""
        return self._said(self.book.finish(max(self.ledger.clock, at)))

    def _explains(self, e: CudaCall) -> bool:
        return self.book.explains(base_name(e.func), e.pid, e.handle, e.ptr, e.result, e.ipc)

    def _said(self, facts: list[HandleFact]) -> list[LedgerFinding]:
        """The facts worded, ``unknown`` where a lost record (a close, a release, an import) may
        overturn them; kept with the ledger's findings (its count and its end summary)."""
        unknown_if_lost = self.ledger.unknown_if_lost
        said = [unknown_if_lost(finding_of(f), f.since) for f in facts]
        self.ledger.findings += said
        return said


def _swap(
    findings: MutableSequence[LedgerFinding], old: LedgerFinding, new: LedgerFinding | None
) -> None:
    """Put ``new`` where the ledger just appended ``old`` (or take ``old`` out): looked for from
    the end and by identity, so a long trace's thousands of findings cost nothing per event (a
    search from the front with dataclass equality made every event slower than the last)."""
    for i in range(len(findings) - 1, -1, -1):
        if findings[i] is old:
            if new is None:
                del findings[i]
            else:
                findings[i] = new
            return


def finding_of(f: HandleFact) -> LedgerFinding:
    """A fact of the refcount book as the ledger's finding, its facts kept (``words.findings``
    words it)."""
    return LedgerFinding(
        str(f.kind),
        f.pid,
        f.ktime,
        peer=f.peer,
        proof=str(f.proof),
        memory=str(f.thing),
        handle=f.key,
        peer_handle=f.exported,
        size=f.size,
        ipc=f.ipc,
        opens=list(f.opens),
        closes=f.closes,
        since=f.since,
        result=f.refused,
        gap_ns=f.gap,
        via=f.via,
        how="mapped" if f.kind == FindingKind.HELD_AFTER_EXPORTER_DIED else "",
    )
