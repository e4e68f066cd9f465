"""Exits go in the kernel's order even when the reader is behind: records are let go only up to
the time the reader last drained every ring, not by the clock alone. A holder's exit read late
(a flood: the ring kept it past the reorder window) is then still folded before its exporter's,
and the exporter's exit does not claim the holder held its memory."""

from __future__ import annotations

import threading

from vmmtui.stream.observed import ProcessExit
from vmmtui.trace import tracer as module
from vmmtui.trace.order import KernelOrder

MS = 1_000_000


def test_records_wait_for_the_reader_to_drain_the_rings_past_them():
    t = module.Tracer(["true"], cuda=False, nvml=False)
    t._reader = threading.Thread()  # a reader runs (not started: only its presence counts)
    t.read_upto_ns = 5 * MS
    assert t._release_point(5 * MS) == 5 * MS  # not now: the rings held more after 5 ms
    t._reader = None  # stopped: every record is out, the clock alone
    assert t._release_point(5 * MS) > 5 * MS


def test_a_holders_exit_read_late_still_goes_before_its_exporters():
    exporter = ProcessExit(1, 1, 1000 * MS, 0)
    holder = ProcessExit(2, 2, 900 * MS, 0)  # exited first, its record still in a ring
    order = KernelOrder()
    t = module.Tracer(["true"], cuda=False, nvml=False)
    t._reader = threading.Thread()
    t.read_upto_ns = 950 * MS  # the reader drained the rings last at 950 ms
    out = order.extend([exporter])
    out += order.release(t._release_point(t.read_upto_ns))
    assert out == []  # 1000 ms is after what the reader vouches for: it waits
    t.read_upto_ns = 1300 * MS  # the reader caught up; the holder's exit came with it
    out += order.extend([holder])
    out += order.release(t._release_point(t.read_upto_ns))
    assert out == [holder, exporter]


def test_past_order_most_the_clock_alone_bounds_the_memory(monkeypatch):
    monkeypatch.setattr(module, "ORDER_MOST", 1)
    t = module.Tracer(["true"], cuda=False, nvml=False)
    t._reader = threading.Thread()
    t.order.extend([ProcessExit(1, 1, 1, 0), ProcessExit(2, 2, 2, 0)])
    assert t._release_point(0) > 0
