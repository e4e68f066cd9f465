"""The one world of an observed run: the ledger (processes, fds of interest, memory, who pins it)
and the refcount book beside it, folded once from the one event stream, whatever the source
(eBPF, polling, a recording). Everything else is a projection of it: the trace's text, the
exporters, Perfetto's file, the timeline's frames.

The world is mutable (one fold a run, the cheapest per event), so an earlier state is had from
keyframes: ``Keyframes`` keeps a clone of the world every ``EVERY`` events folded and answers "the
world after event N" with the nearest keyframe at or before N, cloned, folded on to N. ``EVERY``
is where a clone costs about what folding that many events does (``scripts/trace-world-k.py``
measures both): a step back then costs at most two clones' worth of work, and a long trace keeps
one clone per ``EVERY`` events. No words, no Textual, no /proc.
"""

from __future__ import annotations

import copy
import threading
from bisect import bisect_right

from vmmtui.model.handles import NEVER_IMPORTED_S
from vmmtui.model.kept import Kept
from vmmtui.model.ledger import Ledger
from vmmtui.model.refcounts import Refcounts
from vmmtui.stream.events import Event
from vmmtui.stream.gpu import GpuTable, NvmlSample
from vmmtui.stream.observed import CapabilityProbe, LedgerFinding, PinnedBytes, ProcessExit

#: a keyframe every this many events folded: about what one clone of a busy trace's world costs
#: in events folded (``scripts/trace-world-k.py``, shares_1000 ×10, 51,240 events, on a 2-core VM
#: shared with other work: a clone costs 2 to 6 ms, as much as folding 760 to 940 of its events
#: at 7.7 to 8.0 µs each; 1,024 keeps the world at any event under about two clones' cost)
EVERY = 1024

Made = LedgerFinding | CapabilityProbe | PinnedBytes | GpuTable


class World:
    """The ledger and its refcount book, folded together: ``fold`` one event, ``finish`` at the
    end of the run; ``clone`` a copy that folds on apart (a keyframe)."""

    def __init__(self, never_imported_s: float = NEVER_IMPORTED_S, keep: int | None = None) -> None:
        self.ledger = Ledger(keep=keep)
        #: the refcount book (``model/refcounts.py``), fed after the ledger
        self.refs = Refcounts(self.ledger, never_imported_s)
        #: events folded
        self.folded = 0
        #: held while an event is folded: a reader in another thread (the metrics endpoint's
        #: scrape) holds it to read the world between two events, never in the middle of one
        self.lock = threading.Lock()
        #: NVML's newest reading of the GPUs (an ``NvmlSample`` of the stream): what the GPU
        #: ledger (``model/gpu_ledger.py``) sets beside the ledger; None until one is folded
        self.gpu: NvmlSample | None = None

    def matters(self, e: Event) -> bool:
        """Whether ``e``, before it is folded, is a call that matters (``Ledger.matters``)."""
        return self.ledger.matters(e)

    def fold(self, e: Event) -> list[Made]:
        """One event: the findings, probes and pinned bytes it brings."""
        with self.lock:
            self.folded += 1
            if (
                type(e) is NvmlSample
            ):  # the GPU ledger as of this reading, made here as findings are
                from vmmtui.model.gpu_ledger import as_table, of_world

                self.gpu = e
                return [as_table(of_world(self))]
            if type(e) is ProcessExit:  # what the exit is about to close, noted for the book
                self.refs.before_exit(e)
            return list(self.refs.fold(e, self.ledger.apply(e)))

    def finish(self, at: int = 0) -> list[LedgerFinding]:
        """What the end of the run brings (``Ledger.finish``, then the book's)."""
        with self.lock:
            return [*self.ledger.finish(at), *self.refs.finish()]

    def clone(self) -> World:
        """A copy that folds on apart. The ledger's open entries are mutable records (a shallow
        copy would let the fold on move the keyframe too) and are copied; what it only keeps
        once it is over (closed holdings, transfers, findings, refusals, probes: ``Kept``
        entries, never changed after they are kept) is shared, which is most of a long run's
        world and most of what a deep copy would cost."""
        kept = [v for v in vars(self.ledger).values() if isinstance(v, Kept)]
        memo: dict[int, object] = {id(k): copy.copy(k) for k in kept}
        memo[id(self.lock)] = threading.Lock()  # a lock of its own (a lock is not copied)
        with self.lock:
            return copy.deepcopy(self, memo)


class Keyframes:
    """Every event a world folded, and a clone of it every ``every`` events: ``at(n)`` is the
    world after the first ``n`` events. Events are only appended (``folded``: the world that
    folded them tells it after each), so a keyframe stays true."""

    def __init__(self, start: World | None = None, every: int = EVERY) -> None:
        self.every = every
        self.events: list[Event] = []
        blank = start.clone() if start is not None else World()
        self._frames: dict[int, World] = {0: blank}
        self._ends: list[int] = [0]

    def __len__(self) -> int:
        return len(self.events)

    def folded(self, e: Event, world: World) -> None:
        """``world`` has just folded ``e``: keep it (a keyframe, cloned, every ``every``)."""
        self.events.append(e)
        n = len(self.events)
        if n % self.every == 0:
            self._frames[n] = world.clone()
            self._ends.append(n)

    def at(self, n: int) -> World:
        """The world after the first ``n`` events (clamped): a clone of the nearest keyframe at
        or before ``n``, folded on. Yours to fold further; no keyframe moves."""
        n = max(0, min(n, len(self.events)))
        k = self._ends[bisect_right(self._ends, n) - 1]
        world = self._frames[k].clone()
        for e in self.events[k:n]:
            world.fold(e)
        return world

    def keyframes(self) -> list[int]:
        """The events after which a keyframe is kept (0: the start)."""
        return list(self._ends)
