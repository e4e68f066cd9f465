"""The node agent's numbers, folded from trace events: each test is what an operator asks of a
cluster (who exported what, who still holds memory of a dead exporter, why imports were refused)."""

import os
import threading

import pytest

from vmmtui.fleet.facts import SharingFacts, container_of, refusal_reason
from vmmtui.pipeline.replay import read
from vmmtui.pipeline.session import RecordingSource, TraceSession
from vmmtui.stream.observed import (
    CallRefused,
    CudaCall,
    FdCloseCall,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    ProcessExit,
    RefusalCheck,
    SocketEnd,
    TraceStarted,
)

SOCK = SocketEnd(100, 101, "@vmm")
PEER = SocketEnd(101, 100, "@vmm")
PEER = SocketEnd(101, 100, "@vmm")
EXP, IMP = 1000, 2000
MiB = 1 << 20


def gpu_share_events(exporter_exits: bool) -> list:
    """An exporter creates 2 MiB, exports it as fd 7 and sends it; the importer imports and maps it."""
    events = [
        TraceStarted("ebpf", [EXP, IMP]),
        CudaCall(EXP, EXP, 1, "cuMemCreate", 0, size=2 * MiB, device=0, handle_types=1, handle=0xA),
        CudaCall(EXP, EXP, 2, "cuMemExportToShareableHandle", 0, handle=0xA, fd=7),
        FdsSent(EXP, EXP, 3, "sendmsg", SOCK, [7], ["f7"], 1),
        FdsReceived(IMP, IMP, 4, "recvmsg", PEER, [9], ["f7"], 1),
        CudaCall(IMP, IMP, 5, "cuMemImportFromShareableHandle", 0, handle=0xB, fd=9),
        FdCloseCall(IMP, IMP, 6, 9, "f7", 0),
        CudaCall(IMP, IMP, 7, "cuMemMap", 0, handle=0xB, ptr=0x7F0000, size=2 * MiB),
    ]
    if exporter_exits:
        events.append(ProcessExit(EXP, EXP, 8, 9 << 8))
    return events


def run_of(facts: SharingFacts, sink=None) -> TraceSession:
    """The run's session, its events pushed one at a time (``TraceSession.push``): it folds the
    world ``facts`` read, and its sink (``facts``, or the exporter around them) gets its stream,
    as a live agent's exporters do."""
    feed = (sink or facts).feed
    return TraceSession(RecordingSource(()), [feed], live=False, world=facts.world)


def push(facts: SharingFacts, *events) -> None:
    """``events`` through the run whose world ``facts`` read."""
    run_of(facts).push(*events)


def fed(events, facts: SharingFacts | None = None) -> SharingFacts:
    """The facts as a node agent has them: fed the trace session's stream (its findings too)
    after the session folded each event into the world the facts read."""
    facts = facts or SharingFacts()
    for _ in TraceSession(
        RecordingSource(events), [facts.feed], live=False, world=facts.world
    ).events():
        pass
    return facts


def share_a_gpu_allocation(exporter_exits: bool) -> SharingFacts:
    return fed(gpu_share_events(exporter_exits))


def test_exports_imports_and_live_importers_are_counted_per_process():
    f = share_a_gpu_allocation(exporter_exits=False)
    assert f.exported() == {EXP: (1, 2 * MiB)}
    assert f.imported() == {IMP: (1, 2 * MiB)}
    assert f.live_importers() == {EXP: 1}
    assert f.orphaned_bytes() == {}
    assert f.transfers() == {"SCM_RIGHTS": 1}
    assert f.mode == "ebpf"


def test_an_importer_holding_memory_of_a_dead_exporter_is_counted_until_it_releases():
    f = share_a_gpu_allocation(exporter_exits=True)
    assert f.orphaned_bytes() == {IMP: 2 * MiB}
    push(
        f,
        CudaCall(IMP, IMP, 9, "cuMemUnmap", 0, ptr=0x7F0000),
        CudaCall(IMP, IMP, 10, "cuMemRelease", 0, handle=0xB),
    )
    assert f.orphaned_bytes() == {}
    assert f.live_importers() == {}


def test_refusals_are_counted_by_call_and_a_bounded_reason():
    seccomp = CallRefused(
        IMP,
        "pidfd_getfd",
        "EPERM",
        EXP,
        "seccomp filter",
        "add CAP_SYS_PTRACE",
        checks=[RefusalCheck("seccomp mode", False, "filter (2)"), RefusalCheck("yama", True, "0")],
    )
    pidns = CallRefused(
        IMP,
        "pidfd_getfd",
        "EPERM",
        EXP,
        "other pid namespace",
        "share the pid namespace",
        checks=[RefusalCheck("pid namespace", False, "different")],
    )
    assert refusal_reason(seccomp) == "seccomp"
    assert refusal_reason(pidns) == "pid-namespace"
    f = fed(
        [seccomp, seccomp, pidns, CudaCall(IMP, IMP, 1, "cuMemImportFromShareableHandle", 1, fd=3)]
    )
    assert f.refused == {
        ("pidfd_getfd", "seccomp"): 2,
        ("pidfd_getfd", "pid-namespace"): 1,
        ("cuMemImportFromShareableHandle", "cuda"): 1,
    }


def test_a_received_fd_never_closed_is_counted_at_the_holders_exit():
    f = fed(
        [
            MemfdCreated(EXP, EXP, 1, "buf", 5, "fm"),
            FdsSent(EXP, EXP, 2, "sendmsg", SOCK, [5], ["fm"], 1),
            FdsReceived(IMP, IMP, 3, "recvmsg", SOCK, [8], ["fm"], 1),
            ProcessExit(IMP, IMP, 4, 0),
        ]
    )
    assert f.never_closed == {IMP: 1}


def test_a_process_label_is_its_host_pid_command_and_container_with_names_sanitised():
    f = SharingFacts()
    push(f, MemfdCreated(os.getpid(), os.getpid(), 1, "x", 5, "fx"))
    f._label(os.getpid(), "\x1b]0;PWNED\x07")
    label = f.label(os.getpid())
    assert label.pid == os.getpid()
    assert "\x1b" not in label.comm and "\\x1b" in label.comm
    assert label.container == container_of(os.getpid())
    assert label.container  # this process runs in some cgroup ("/" at least)


def test_lost_records_are_counted_per_cpu_and_a_leak_they_could_hide_is_unknown():
    """A close lost in a full ring buffer must not become a leak on a dashboard: the agent counts
    the loss per CPU and the conclusion as unknown, and exports both."""
    from vmmtui.fleet.prometheus import LedgerCollector
    from vmmtui.stream.observed import TraceLost

    f = fed(
        [
            FdsSent(EXP, EXP, 2, "sendmsg", SOCK, [5], ["fm"], 1),
            FdsReceived(IMP, IMP, 3, "recvmsg", PEER, [8], ["fm"], 1),  # the other end
            TraceLost(7, 9, 1, 4, 9),
            TraceLost(2, 9, 0, 4, 9),
            ProcessExit(IMP, IMP, 10, 0),
        ]
    )
    assert (f.never_closed, f.unknown, f.lost_by_cpu()) == ({}, 1, {1: 7, 0: 2})
    scraped = {
        (s.name, tuple(s.labels.items())): s.value
        for fam in LedgerCollector(f, threading.Lock()).collect()
        for s in fam.samples
    }
    assert scraped[("vmmtui_unknown_findings_total", ())] == 1
    assert scraped[("vmmtui_records_lost_total", (("cpu", "1"),))] == 7
    assert scraped[("vmmtui_records_lost_total", (("cpu", "0"),))] == 2
    assert scraped[("vmmtui_fds_in_flight_total", ())] == 0


def test_the_metrics_count_the_findings_the_end_line_counts():
    """One count: the agent's ``vmmtui_findings`` over a run add up to its ``TraceFinished``."""
    from pathlib import Path

    from vmmtui.fleet.prometheus import LedgerCollector
    from vmmtui.stream.observed import TraceFinished

    path = Path(__file__).parents[1] / "data" / "traces" / "fake_pool_calls.jsonl.gz"
    f = SharingFacts()
    events = list(
        TraceSession(
            RecordingSource(read(path).events), [f.feed], live=False, world=f.world
        ).events()
    )
    end = next(e for e in events if isinstance(e, TraceFinished))
    scraped = [
        s.value
        for fam in LedgerCollector(f, threading.Lock()).collect()
        for s in fam.samples
        if s.name == "vmmtui_findings_total"
    ]
    assert sum(scraped) == end.findings > 0


def test_the_metrics_weigh_the_findings_as_the_end_line_does():
    """A receiver that kept a socket, a pipe and a memfd until exit (a real run, recorded): all
    three are facts, released by the exit (``model/policy.py``); the memfd is the one fd never
    closed, counted as memory held until exit, the socket and the pipe by their kind."""
    from pathlib import Path

    from vmmtui.fleet.prometheus import LedgerCollector
    from vmmtui.stream.observed import TraceFinished

    path = Path(__file__).parents[1] / "data" / "traces" / "keeps_received.jsonl.gz"
    f = SharingFacts()
    events = list(
        TraceSession(
            RecordingSource(read(path).events), [f.feed], live=False, world=f.world
        ).events()
    )
    end = next(e for e in events if isinstance(e, TraceFinished))
    scraped = {
        (s.name, tuple(s.labels.values())): s.value
        for fam in LedgerCollector(f, threading.Lock()).collect()
        for s in fam.samples
    }
    weights = {
        w: scraped[("vmmtui_findings_by_weight_total", (w,))] for w in ("good", "problem", "quiet")
    }
    assert weights == {"good": 3, "problem": end.problems, "quiet": end.quiet}
    assert (end.problems, end.quiet) == (0, 3)
    assert end.quiet_by == {"socket": 1, "pipe": 1, "held until exit": 1}
    assert sum(weights.values()) == end.findings
    [never] = [v for (n, _), v in scraped.items() if n == "vmmtui_received_fds_never_closed_total"]
    assert never == 1


@pytest.mark.parametrize("name", ["fanout_leak", "fake_pool_calls", "held_after_death_released"])
def test_the_metrics_count_each_problem_once_as_the_end_line_does(name):
    """Recordings of real runs with a hold past its exporter's end: the metrics' problems are the
    end line's (``model.policy``: one per relation), its end and its pins folded in."""
    from pathlib import Path

    from vmmtui.stream.observed import TraceFinished

    path = Path(__file__).parents[1] / "data" / "traces" / f"{name}.jsonl.gz"
    f = SharingFacts()
    events = list(
        TraceSession(
            RecordingSource(read(path).events), [f.feed], live=False, world=f.world
        ).events()
    )
    end = next(e for e in events if isinstance(e, TraceFinished))
    assert end.problems == 1 and f.weights["problem"] == end.problems
    assert f.weights["quiet"] == end.quiet


def test_the_gpu_pinned_bytes_name_the_holder_the_creator_and_whether_it_lives():
    """The GPU ledger as the agent's numbers: the importer pins the exporter's 2 MiB on GPU 0,
    the creator alive, then gone (orphaned); NVML's charges beside it, from its reading."""
    from vmmtui.stream.gpu import GpuCharge, GpuReading, NvmlSample

    def reading(**charges: int) -> NvmlSample:
        return NvmlSample(
            [
                GpuReading(
                    0, "GPU-x", 80 << 30, 0, [GpuCharge(int(p[1:]), n) for p, n in charges.items()]
                )
            ]
        )

    f = share_a_gpu_allocation(exporter_exits=False)
    push(f, reading(**{f"p{EXP}": 500 * MiB, f"p{IMP}": 300 * MiB}))
    assert f.gpu_pinned() == {("0", str(IMP), str(EXP), "true"): 2 * MiB}
    assert f.gpu_charged() == {("0", str(EXP)): 500 * MiB, ("0", str(IMP)): 300 * MiB}
    push(f, ProcessExit(EXP, EXP, 8, 9 << 8), reading(**{f"p{IMP}": 302 * MiB}))
    assert f.gpu_pinned() == {("0", str(IMP), str(EXP), "false"): 2 * MiB}
    assert f.gpu_charged() == {("0", str(IMP)): 302 * MiB}

    import prometheus_client
    from prometheus_client.core import CollectorRegistry

    from vmmtui.fleet.prometheus import LedgerCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(f, threading.Lock()))
    text = prometheus_client.generate_latest(registry).decode()
    assert (
        f'vmmtui_gpu_pinned_bytes{{creator="{EXP}",creator_alive="false",gpu="0",holder="{IMP}"}} '
        "2.097152e+06" in text
    ), text
    assert f'vmmtui_gpu_charged_bytes{{gpu="0",pid="{IMP}"}} 3.16669952e+08' in text
