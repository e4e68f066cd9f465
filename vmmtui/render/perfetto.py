"""``--perfetto FILE``: an event stream as a trace that ui.perfetto.dev (and chrome://tracing) opens.

The Chrome JSON trace format, which Perfetto's UI imports: one track per process (and per thread
where a trace knows them), each call or step a slice, and a flow arrow from each export to each
import and from each fd's send to its receive, so the road an allocation took reads left to right.

Two sources: a trace (``vmmtui trace``: kernel times, real threads, the ledger's matches) and a
session recording (``vmmtui run --record``/the gallery: steps and their driver calls laid end to end
on each worker's track, in the order and for the durations the workers measured).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vmmtui.model.findings import Memory
from vmmtui.plan.steps import base, peer_of
from vmmtui.stream.events import Event, ProcessSeen, SessionStarted, StepDone, WorkerStarted
from vmmtui.stream.names import shown
from vmmtui.stream.observed import (
    CudaCall,
    FdsReceived,
    FdsSent,
    FdTaken,
    LedgerFinding,
    PinnedBytes,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    TraceCall,
    TraceStarted,
)
from vmmtui.system.atomic import write_whole

#: the flows of a session: (producer's step, consumer's step, what travels)
SESSION_FLOWS = (("send", "receive", "fd"), ("export", "import", "allocation"))


def _slice(name: str, pid: int, tid: int, ts_us: float, dur_us: float, args: dict) -> dict:
    return {
        "name": name,
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": round(ts_us, 3),
        "dur": round(max(dur_us, 0.001), 3),
        "args": args,
    }


def _flow(fid: int, name: str, a: tuple[int, int, float], b: tuple[int, int, float]) -> list[dict]:
    start = {"name": name, "cat": "share", "ph": "s", "id": fid, "pid": a[0], "tid": a[1]}
    end = {"name": name, "cat": "share", "ph": "f", "bp": "e", "id": fid, "pid": b[0], "tid": b[1]}
    return [{**start, "ts": round(a[2], 3)}, {**end, "ts": round(b[2], 3)}]


def _pinned(e: PinnedBytes, ts_us: float) -> dict:
    """The bytes an exporter pins, as a counter: a staircase is a leak of one buffer per step."""
    return {"name": "pinned bytes", "ph": "C", "pid": e.pid, "ts": ts_us,
            "args": {"bytes": e.bytes}}  # fmt: skip


def _process_name(pid: int, name: str) -> dict:
    return {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}


def _comm(comms: dict[int, str], e: Event) -> None:
    """Each process's name as the world names it (``Ledger``'s rules: the first /proc name, a
    fork's child its parent's, an exec's or an exit's where given)."""
    if isinstance(e, ProcessSeen):
        comms[e.pid] = comms.get(e.pid) or e.name
    elif isinstance(e, ProcessForked):
        comms[e.child] = e.comm
    elif isinstance(e, ProcessExec | ProcessExit):
        comms[e.pid] = e.comm or comms.get(e.pid, "")


def from_trace(events: Iterable[Event]) -> list[dict]:
    """Trace events → slices (one per call) and flows (send → receive, export → import).

    ``events`` are the run's stream as the pipeline made it (``TraceSession``: each event, then
    the findings the world found in it): the flows are the world's matches, read from its
    ``shared`` and ``imported`` findings, and nothing is folded here (a replay hands the stream
    of its one fold, ``record.calls.trace_timeline``)."""
    out: list[dict] = []
    t0: int | None = None
    comms: dict[int, str] = {}
    where: dict[
        tuple[str, int, int], tuple[int, int, float]
    ] = {}  # (kind, pid, fd) → (pid, tid, ts)
    exports: dict[str, tuple[int, int, float]] = {}  # file → export call's position
    #: where the last receive of each process and the last import of each handle was drawn
    received: dict[int, tuple[int, int, float]] = {}
    imported: dict[tuple[int, int], tuple[int, int, float]] = {}
    flows = 0
    named: set[int] = set()
    for e in events:
        if isinstance(e, TraceStarted):
            t0 = e.ktime0 or t0
        _comm(comms, e)
        if isinstance(e, PinnedBytes):  # a counter track per exporter
            zero = e.ktime if t0 is None else t0
            out.append(_pinned(e, (e.ktime - zero) / 1e3))
            continue
        if isinstance(e, LedgerFinding):
            if e.kind == "shared" and e.via == "SCM_RIGHTS" and e.peer:
                src = where.get(("sent", e.peer, e.peer_fd))
                dst = received.get(e.pid)
                if src is not None and dst is not None:
                    flows += 1
                    out += _flow(flows, f"fd {e.peer_fd} → fd {e.fd}", src, dst)
            elif e.kind == "imported" and e.memory == Memory.ALLOCATION and e.file:
                src = exports.get(e.file)
                dst = imported.get((e.pid, e.handle))
                if src is not None and dst is not None:
                    flows += 1
                    out += _flow(flows, "export → import", src, dst)
            continue
        if not isinstance(e, TraceCall):
            continue
        t0 = e.ktime if t0 is None else t0
        ts = (e.ktime - t0) / 1e3
        if e.pid not in named:
            named.add(e.pid)
            out.append(_process_name(e.pid, f"{shown(comms.get(e.pid, '')) or 'pid'} {e.pid}"))
        if isinstance(e, CudaCall):
            dur = e.duration_ns / 1e3
            start = ts - dur
            call = {
                k: v
                for k, v in (("result", e.result), ("size", e.size), ("fd", e.fd))
                if v not in (0, -1) or k == "result"
            }
            out.append(_slice(e.func, e.pid, e.tid, start, dur, call))
            f = e.func.removesuffix("_v2")
            if f == "cuMemExportToShareableHandle" and e.fd >= 0:
                where[("exported", e.pid, e.fd)] = (e.pid, e.tid, start)
            elif f == "cuMemImportFromShareableHandle" and e.result == 0:
                imported[(e.pid, e.handle)] = (e.pid, e.tid, start)
            continue
        name = type(e).__name__
        args: dict[str, Any] = {}
        if isinstance(e, FdsSent):
            name, args = e.call, {"fds": e.fds, "result": e.result}
            for fd, file in zip(e.fds, e.files, strict=False):
                where[("sent", e.pid, fd)] = (e.pid, e.tid, ts)
                if ("exported", e.pid, fd) in where:
                    exports[file] = where[("exported", e.pid, fd)]
        elif isinstance(e, FdsReceived):
            name, args = e.call, {"fds": e.fds, "result": e.result}
            received[e.pid] = (e.pid, e.tid, ts)
        elif isinstance(e, FdTaken):
            name, args = "pidfd_getfd", {"target": e.target, "target_fd": e.target_fd, "fd": e.fd}
            src = where.get(("exported", e.target, e.target_fd)) or where.get(
                ("made", e.target, e.target_fd)
            )
            if e.fd >= 0 and e.file and src is not None:
                exports.setdefault(e.file, src)
        out.append(_slice(name, e.pid, e.tid, ts, 1.0, args))
    return out


def from_session(events: Iterable[Event]) -> list[dict]:
    """A session's steps → one slice per step on its worker's track (calls nested inside), laid end
    to end by the workers' own durations; flows from the producer's export to each consumer's
    receive and import."""
    out: list[dict] = []
    pids: dict[str, int] = {}
    clock = 0.0
    left: dict[tuple[str, str], tuple[int, int, float]] = {}  # (what, to whom) → where it left
    flows = 0
    for e in events:
        if isinstance(e, SessionStarted):
            out.append({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "session"}})
        elif isinstance(e, WorkerStarted):
            pids[e.role] = e.pid
            out.append(_process_name(e.pid, f"{e.role} ({e.backend}) {e.pid}"))
        elif isinstance(e, StepDone):
            r = e.report
            pid = pids.get(r.role, 0)
            dur = r.duration_ns / 1e3
            out.append(_slice(r.step, pid, pid, clock, dur, {"ok": r.ok, "index": e.index}))
            at = clock
            for c in r.calls:
                out.append(
                    _slice(
                        c.name, pid, pid, at, c.duration_ns / 1e3, {"result": shown(c.result, 120)}
                    )
                )
                at += c.duration_ns / 1e3
            step = base(r.step)
            for out_step, in_step, what in SESSION_FLOWS:
                if r.role == "producer" and step == out_step:
                    left[(what, peer_of(r.step) if step == "send" else "*")] = (pid, pid, clock)
                elif r.role != "producer" and step == in_step:
                    src = left.get((what, r.role)) or left.get((what, "*"))
                    if src is not None:
                        flows += 1
                        out += _flow(flows, f"{what}: producer → {r.role}", src, (pid, pid, clock))
            clock += max(e.roundtrip_ns / 1e3, dur)
    return out


def write(path: str | Path, events: list[Event]) -> int:
    """Write the trace for ``events`` (a trace or a session, told by their types); returns the
    number of trace events written."""
    is_trace = any(isinstance(e, TraceStarted | TraceCall) for e in events)
    body = from_trace(events) if is_trace else from_session(events)
    # whole or not at all: a full disk leaves no half a JSON file under the name
    write_whole(path, json.dumps({"traceEvents": body, "displayTimeUnit": "ns"}))
    return len(body)
