"""What the screen and the metrics make of the refcount book: an exporter's pinned bytes as a
bounded series drawn as a sparkline in its panel and a Prometheus gauge, and each transfer's
road with the handle type at each end."""

from __future__ import annotations

import threading

from vmmtui.fleet.facts import SharingFacts
from vmmtui.model.handles import SERIES_POINTS, extend_series
from vmmtui.pipeline.session import refold
from vmmtui.stream.observed import (
    CudaCall,
    FdsReceived,
    FdsSent,
    PinnedBytes,
    SocketEnd,
    TraceStarted,
)
from vmmtui.tui.widgets.programs import pinned_row, sparkline
from vmmtui.view.programs import ProgramsView, fold_program_event
from vmmtui.view.roads import transfer_road

A, B, MIB, T0 = 1000, 2000, 1 << 20, 1_000_000_000
SOCK = SocketEnd(100, 101, "@w")
#: the receiving end: the socket the sends are queued on
PEER = SocketEnd(101, 100, "@w")


def leaking_steps(steps: int = 3, gap: int = 100_000_000) -> list:
    """Each step: A exports a 1 MiB allocation, B imports it twice and releases once, A releases."""
    out: list = [TraceStarted("ebpf", [A], ["x"], ktime0=T0)]
    for step in range(steps):
        t = T0 + (step + 1) * gap
        h, fd, rfd, file = 0xA0 + step, 5 + step, 9 + step, f"f{step}"
        out += [
            CudaCall(A, A, t, "cuMemCreate", 0, size=MIB, handle=h, handle_types=1),
            CudaCall(A, A, t + 1, "cuMemExportToShareableHandle", 0, handle=h, fd=fd,
                     handle_types=1),
            FdsSent(A, A, t + 2, "sendmsg", SOCK, [fd], [file], 1),
            FdsReceived(B, B, t + 3, "recvmsg", PEER, [rfd], [file], 1),
            CudaCall(B, B, t + 4, "cuMemImportFromShareableHandle", 0, handle=0xB0 + 2 * step,
                     fd=rfd, handle_types=1),
            CudaCall(B, B, t + 5, "cuMemImportFromShareableHandle", 0, handle=0xB1 + 2 * step,
                     fd=rfd, handle_types=1),
            CudaCall(B, B, t + 6, "cuMemRelease", 0, handle=0xB0 + 2 * step),
            CudaCall(A, A, t + 7, "cuMemRelease", 0, handle=h),
        ]  # fmt: skip
    return out


def screen(events) -> ProgramsView:
    v = ProgramsView()
    for e in events:
        v = fold_program_event(v, e)
    return v


def test_the_exporter_panel_series_grows_one_buffer_per_step():
    v = screen(refold(leaking_steps()))
    assert [b for _, b in v.proc(A).pinned] == [MIB, 2 * MIB, 3 * MIB]
    assert v.proc(B).pinned == ()
    row = pinned_row(v.proc(A).pinned).plain
    assert row.startswith("pinned ▄▆█ 3 MiB now"), row
    assert sparkline([MIB, 2 * MIB, 3 * MIB]) == "▄▆█" and sparkline([0, 0]) == "▁▁"


def test_the_series_is_bounded_and_keeps_one_point_per_change():
    s: tuple = ()
    for i in range(SERIES_POINTS + 10):
        s = extend_series(s, i, i)
    assert len(s) == SERIES_POINTS and s[-1] == (SERIES_POINTS + 9, SERIES_POINTS + 9)
    assert extend_series(((5, 1),), 5, 2) == ((5, 2),)


def test_prometheus_carries_the_pinned_bytes_per_exporter():
    from prometheus_client import CollectorRegistry, generate_latest

    from vmmtui.fleet.prometheus import LedgerCollector

    facts = SharingFacts()
    for e in refold(leaking_steps()):
        facts.feed(e)
    assert facts.pinned == {A: 3 * MIB}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(facts, threading.Lock()))
    text = generate_latest(registry).decode()
    [line] = [x for x in text.splitlines() if x.startswith("vmmtui_pinned_bytes{")]
    assert f'pid="{A}"' in line and float(line.split()[-1]) == 3 * MIB


def test_a_transfer_row_names_its_road_and_both_ends():
    events = refold(leaking_steps(1))
    v = screen(events)
    [t] = v.transfer_list()
    assert transfer_road(v, t) == ("scm-rights", "posix-fd", "posix-fd")
    # before the receiver imported it, the fd is only an fd at its end
    before = screen(events[: next(i for i, e in enumerate(events) if isinstance(e, FdsReceived))
                           + 2])  # fmt: skip
    [t] = before.transfer_list()
    assert transfer_road(before, t) == ("scm-rights", "posix-fd", "fd")
    assert all(not isinstance(e, PinnedBytes) or e.pid == A for e in events)


def test_the_exporter_panel_draws_its_pinned_bytes_first():
    from vmmtui.tui.widgets.programs import program_rows

    v = screen(refold(leaking_steps()))
    rows = program_rows(v, v.proc(A), "time", 20).plain.splitlines()
    assert rows[0].startswith("pinned ▄▆█ 3 MiB now"), rows
    importer = program_rows(v, v.proc(B), "time", 20).plain
    assert "pinned" not in importer


def test_an_import_of_a_reused_fd_and_file_is_of_the_newest_allocation():
    events = leaking_steps(2)
    for i, e in enumerate(events):  # the kernel reused the fd number and the struct file
        if isinstance(e, FdsSent | FdsReceived):
            events[i] = type(e)(e.pid, e.tid, e.ktime, e.call, e.sock, e.fds, ["same"], 1)
        elif isinstance(e, CudaCall) and e.func == "cuMemExportToShareableHandle":
            events[i] = CudaCall(A, A, e.ktime, e.func, 0, handle=e.handle, fd=5, handle_types=1)
    v = screen(refold(events))
    assert v.proc(B).mems[("import", 0xB2)].of == (A, 0xA1)


def test_a_staircase_within_one_millisecond_keeps_every_step():
    v = screen(refold(leaking_steps(3, gap=20_000)))  # three steps in 60 µs
    assert [b for _, b in v.proc(A).pinned] == [MIB, 2 * MIB, 3 * MIB]


def test_perfetto_draws_each_exporters_pinned_bytes_as_a_counter():
    from vmmtui.render.perfetto import from_trace

    counters = [x for x in from_trace(refold(leaking_steps())) if x.get("ph") == "C"]
    assert [(c["pid"], c["args"]["bytes"]) for c in counters] == [
        (A, MIB),
        (A, 2 * MIB),
        (A, 3 * MIB),
    ]
    assert [c["ts"] for c in counters] == sorted(c["ts"] for c in counters)
