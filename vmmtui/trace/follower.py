"""A ``Tracer`` of a pid set that grows, read on demand: the demo's record of its own workers.

``vmmtui trace`` runs its own loop (a reader thread, a reorder window). The demo knows when its
workers' calls have returned (each step's answer comes after them), so it drains the ring buffer
at those moments instead (``vmmtui.session.kernel``): every record is already there, and sorting
the batch by the kernel's timestamp puts it in the kernel's order without waiting a window out.
"""

from __future__ import annotations

import contextlib
import time

from vmmtui.stream.events import Event
from vmmtui.stream.observed import TraceFinished, TraceStarted
from vmmtui.trace.order import stamp
from vmmtui.trace.tracer import Tracer

#: the demo's workers make tens of calls a step, drained after each: a small ring holds them all
RING_BYTES = 4 << 20


class Follower(Tracer):
    """Follows the pids it is given (``take``); ``drain`` returns what the kernel recorded."""

    def __init__(self) -> None:
        super().__init__(pids=[], cuda=True, nvml=False, ring_bytes=RING_BYTES)
        self._start_ns = time.monotonic_ns()

    def take(self, pid: int) -> None:
        """Follow ``pid`` from now on (its children from their fork)."""
        assert self.probe is not None, "start() loaded the probe"
        self.probe.follow(pid)
        self.alive.add(pid)

    def started(self, pids: list[int]) -> TraceStarted:
        """How the record runs: the pids followed, what is probed and what is not."""
        self._start_ns = time.monotonic_ns()
        return TraceStarted("ebpf", pids, [], False, "", self.probes, self.unprobed, self.ktime0)

    def drain(self) -> list[Event]:
        """Every record in the ring buffer now, decoded, oldest first (losses said in place)."""
        probe = self.probe
        if probe is None:
            return []
        calls: list[Event] = []
        for raw in probe.poll(0):
            calls += self._calls(self.decoder(raw))
        calls += self._losses(force=True)
        calls.sort(key=lambda e: stamp(e) or 0)
        return calls

    def finish(self) -> list[Event]:
        """The last records, then ``TraceFinished``; the probe detaches."""
        out = self.drain()
        if self.probe is not None:
            out += self._calls(self.decoder.flush())
        with contextlib.suppress(OSError):
            self.close()
        seconds = round((time.monotonic_ns() - self._start_ns) / 1e9, 3)
        out.append(TraceFinished([], None, None, self.count, self.lost, seconds))
        return out
