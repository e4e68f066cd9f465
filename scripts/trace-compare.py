"""Does ``vmmtui trace`` agree with a session's own event stream? Every export, send, receive,
import and release the session reports (``vmmtui run --json``) must be in the trace's recording
(``vmmtui trace --record``) with the same pids, fd numbers and handles, and each receive must be
the very open file that was sent (the ledger's transfer). Exit 1 on any disagreement.

    vmmtui trace --record trace.jsonl -- sh -c 'vmmtui run --backend cuda --json > run.jsonl'
    python3 scripts/trace-compare.py run.jsonl trace.jsonl

Roads: ``--mechanism vmm`` and ``pool`` (the pool's fd, each pointer's 64 export bytes, frees and
destroys), ``--transport scm-rights`` and ``pidfd`` (the consumer takes the fd with pidfd_getfd:
no send, the take must name the producer's open file), memfd and cuda backends.
"""

from __future__ import annotations

import json
import sys

from vmmtui.pipeline.replay import read
from vmmtui.pipeline.session import TraceSession
from vmmtui.stream.observed import (
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    FdTaken,
    MemfdCreated,
)


def session(path: str) -> tuple[dict, dict[str, int], dict[tuple[str, str], dict]]:
    started: dict = {}
    pids: dict[str, int] = {}
    states: dict[tuple[str, str], dict] = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        d = json.loads(line)
        if d["event"] == "SessionStarted":
            started = d
        elif d["event"] == "WorkerStarted":
            pids[d["role"]] = d["pid"]
        elif d["event"] == "StepDone":
            r = d["report"]
            states[(r["role"], r["step"])] = r["state"]
    return started, pids, states


def main(run_path: str, trace_path: str) -> int:
    started, pids, states = session(run_path)
    backend = started.get("backend", "")
    pool = started.get("mechanism") == "pool"
    pidfd = started.get("transport") == "pidfd"
    events = read(trace_path).events
    run = TraceSession.replay(events)
    for _ in run.events():
        pass
    ledger = run.ledger
    rows: list[tuple[str, bool, str]] = []

    def check(what: str, ok: bool, detail: str) -> None:
        rows.append((what, ok, detail))

    def of(cls, pid, **kw):
        return [
            e
            for e in events
            if isinstance(e, cls)
            and e.pid == pid
            and all(getattr(e, k) == v for k, v in kw.items())
        ]

    producer = pids["producer"]
    exported = states[("producer", "export")]["exported_fd"]
    p_handle = states[("producer", "create")]["mapping"]["handle"]
    export_call = "cuMemPoolExportToShareableHandle" if pool else "cuMemExportToShareableHandle"
    if backend == "cuda":
        exp = of(CudaCall, producer, func=export_call, fd=exported, result=0)
        check(
            "export",
            bool(exp) and exp[0].handle == p_handle,
            f"{export_call}: pid {producer} {'pool' if pool else 'handle'} {p_handle:#x} → fd "
            f"{exported}: {len(exp)} in the trace",
        )
    else:
        exp = of(FdDuplicated, producer, fd=exported)
        check(
            "export",
            bool(exp),
            f"pid {producer} fd {exported} (a dup of the memfd): {len(exp)} in the trace",
        )
    memfd_files = {e.file for e in of(MemfdCreated, producer) if e.fd >= 0}
    consumers = sorted(r for r in pids if r.startswith("consumer"))
    if not pidfd:
        # over the session's socket (a worker's own start-up checks send fds to themselves too)
        path = started.get("socket_path", "")
        sent = [
            e
            for e in of(FdsSent, producer)
            if exported in e.fds and e.result >= 0 and (not path or e.sock.name == path)
        ]
        check(
            "send",
            len(sent) == len(consumers),
            f"pid {producer} sent fd {exported} {len(sent)}× over {path or 'its socket'} for "
            f"{len(consumers)} consumer(s)",
        )
    p_ptr = states[("producer", "create")]["mapping"]["va"]
    data = ""
    if pool:
        ptr_exp = of(CudaCall, producer, func="cuMemPoolExportPointer", ptr=p_ptr, result=0)
        data = ptr_exp[0].ipc if len(ptr_exp) == 1 else ""
        check(
            "export pointer",
            len(ptr_exp) == 1 and len(data) == 128,
            f"cuMemPoolExportPointer({p_ptr:#x}) → 64 bytes: {len(ptr_exp)} in the trace",
        )
    for role in consumers:
        pid = pids[role]
        got = states.get((role, "receive"), {}).get("received_fd")
        if pidfd:
            recv = [
                e
                for e in of(FdTaken, pid, fd=got)
                if (e.target, e.target_fd) == (producer, exported)
            ]
            check(
                f"{role} take",
                len(recv) == 1,
                f"pidfd_getfd(pid {producer}'s fd {exported}) → pid {pid} fd {got}: "
                f"{len(recv)} in the trace",
            )
            if backend != "cuda":
                check(
                    f"{role} took the memfd",
                    len(recv) == 1 and recv[0].file in memfd_files,
                    f"the taken fd names the open file of pid {producer}'s memfd_create",
                )
        else:
            recv = [e for e in of(FdsReceived, pid) if got in e.fds]
            check(
                f"{role} receive", len(recv) == 1, f"pid {pid} fd {got}: {len(recv)} in the trace"
            )
        same = [
            t
            for t in ledger.transfers
            if (t.from_pid, t.from_fd, t.to_pid, t.to_fd) == (producer, exported, pid, got)
            and t.how == ("pidfd_getfd" if pidfd else "SCM_RIGHTS")
        ]
        check(
            f"{role} same file",
            len(same) == 1,
            f"pid {producer} fd {exported} ≡ pid {pid} fd {got} (the kernel's struct file)",
        )
        mapping = states.get((role, "import"), {}).get("mapping", {})
        handle = mapping.get("handle")
        if backend == "cuda" and pool:
            _check_pool_import(check, of, ledger, producer, p_ptr, pid, got, mapping, data, role)
        elif backend == "cuda":
            imp = of(CudaCall, pid, func="cuMemImportFromShareableHandle", fd=got, result=0)
            check(
                f"{role} import",
                len(imp) == 1 and imp[0].handle == handle,
                f"fd {got} → handle {handle}: {[hex(i.handle) for i in imp]}",
            )
            rel = of(CudaCall, pid, func="cuMemRelease", handle=handle, result=0)
            check(
                f"{role} release", len(rel) == 1, f"cuMemRelease({handle}): {len(rel)} in the trace"
            )
        else:
            imp = of(FdDuplicated, pid, old=got)
            check(f"{role} import", bool(imp), f"dup of fd {got}: {len(imp)} in the trace")
            closed = of(FdCloseCall, pid, fd=got, result=0)
            check(f"{role} release", bool(closed), f"close({got}): {len(closed)} in the trace")
    if backend == "cuda" and pool:
        freed = of(CudaCall, producer, ptr=p_ptr, result=0)
        check(
            "producer frees",
            [e.func.removesuffix("_ptsz") for e in freed if "Free" in e.func] == ["cuMemFreeAsync"],
            f"cuMemFreeAsync({p_ptr:#x}): {len(freed)} call(s) on it in the trace",
        )
        gone = of(CudaCall, producer, func="cuMemPoolDestroy", handle=p_handle, result=0)
        check("producer destroys", len(gone) == 1, f"cuMemPoolDestroy({p_handle:#x}): {len(gone)}")
    elif backend == "cuda":
        rel = of(CudaCall, producer, func="cuMemRelease", handle=p_handle, result=0)
        check(
            "producer release", len(rel) == 1, f"cuMemRelease({p_handle}): {len(rel)} in the trace"
        )
    closed = of(FdCloseCall, producer, fd=exported, result=0)
    check(
        "producer closes the exported fd",
        bool(closed),
        f"close({exported}): {len(closed)} in the trace",
    )
    leaks = [
        f
        for f in ledger.findings
        if f.kind.endswith("never-released")
        or f.kind.endswith("never-freed")
        or f.kind.endswith("never-destroyed")
        or f.kind == "held-after-exporter-died"
    ]
    check("no leak found", not leaks, "; ".join(f"{f.kind} pid {f.pid}" for f in leaks) or "none")
    for what, ok, detail in rows:
        print(f"{'agree   ' if ok else 'DISAGREE'} {what:32} {detail}")
    bad = sum(not ok for _, ok, _ in rows)
    road = f"{backend}, {started.get('mechanism', 'vmm')}, {started.get('transport', 'scm-rights')}"
    print(f"{len(rows) - bad}/{len(rows)} agree ({road})")
    return 1 if bad else 0


def _check_pool_import(check, of, ledger, producer, p_ptr, pid, got, mapping, data, role) -> None:
    """The consumer's pool from the fd, its pointer from the 64 bytes; both matched, freed, destroyed."""
    pool_h, ptr = mapping.get("handle"), mapping.get("va")
    imp = of(CudaCall, pid, func="cuMemPoolImportFromShareableHandle", fd=got, result=0)
    check(
        f"{role} import pool",
        len(imp) == 1 and imp[0].handle == pool_h,
        f"fd {got} → pool {pool_h}: {[hex(i.handle) for i in imp]}",
    )
    ptrs = of(CudaCall, pid, func="cuMemPoolImportPointer", result=0)
    check(
        f"{role} import pointer",
        len(ptrs) == 1 and (ptrs[0].ptr, ptrs[0].handle, ptrs[0].ipc) == (ptr, pool_h, data),
        f"pool {pool_h} + the producer's 64 bytes → {ptr}: {len(ptrs)} in the trace",
    )
    matched = [
        f
        for f in ledger.findings
        if f.kind == "imported" and f.pid == pid and f.peer == producer and "64 export" in f.detail
    ]
    check(f"{role} pointer matched", len(matched) == 1, f"to pid {producer}'s {p_ptr:#x}")
    freed = of(CudaCall, pid, ptr=ptr, result=0)
    check(
        f"{role} frees",
        [e.func.removesuffix("_ptsz") for e in freed if "Free" in e.func] == ["cuMemFreeAsync"],
        f"cuMemFreeAsync({ptr}): {len(freed)} call(s) on it",
    )
    gone = of(CudaCall, pid, func="cuMemPoolDestroy", handle=pool_h, result=0)
    check(f"{role} destroys", len(gone) == 1, f"cuMemPoolDestroy({pool_h}): {len(gone)}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
