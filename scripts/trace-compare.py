"""Does ``vmmtui trace`` agree with a session's own event stream? Every export, send, receive,
import and release the session reports (``vmmtui run --json``) must be in the trace's recording
(``vmmtui trace --record``) with the same pids, fd numbers and handles, and each receive must be
the very open file that was sent (the ledger's transfer). Exit 1 on any disagreement.

    vmmtui trace --record trace.jsonl -- sh -c 'vmmtui run --backend cuda --json > run.jsonl'
    python3 scripts/trace-compare.py run.jsonl trace.jsonl
"""

from __future__ import annotations

import json
import sys

from vmmtui.record.recording import read
from vmmtui.trace.events import CudaCall, FdCloseCall, FdDuplicated, FdsReceived, FdsSent
from vmmtui.trace.ledger import Ledger


def session(path: str) -> tuple[str, dict[str, int], dict[tuple[str, str], dict]]:
    backend, pids, states = "", {}, {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for line in lines:
        d = json.loads(line)
        if d["event"] == "SessionStarted":
            backend = d["backend"]
        elif d["event"] == "WorkerStarted":
            pids[d["role"]] = d["pid"]
        elif d["event"] == "StepDone":
            r = d["report"]
            states[(r["role"], r["step"])] = r["state"]
    return backend, pids, states


def main(run_path: str, trace_path: str) -> int:
    backend, pids, states = session(run_path)
    events = read(trace_path).events
    ledger = Ledger()
    for e in events:
        ledger.apply(e)
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
    if backend == "cuda":
        exp = of(CudaCall, producer, func="cuMemExportToShareableHandle", fd=exported, result=0)
        check(
            "export",
            bool(exp) and exp[0].handle == p_handle,
            f"pid {producer} handle {p_handle:#x} → fd {exported}: {len(exp)} in the trace",
        )
    else:
        exp = of(FdDuplicated, producer, fd=exported)
        check(
            "export",
            bool(exp),
            f"pid {producer} fd {exported} (a dup of the memfd): {len(exp)} in the trace",
        )
    consumers = sorted(r for r in pids if r.startswith("consumer"))
    sent = [e for e in of(FdsSent, producer) if exported in e.fds and e.result >= 0]
    check(
        "send",
        len(sent) == len(consumers),
        f"pid {producer} sent fd {exported} {len(sent)}× for {len(consumers)} consumer(s)",
    )
    for role in consumers:
        pid = pids[role]
        got = states.get((role, "receive"), {}).get("received_fd")
        recv = [e for e in of(FdsReceived, pid) if got in e.fds]
        check(f"{role} receive", len(recv) == 1, f"pid {pid} fd {got}: {len(recv)} in the trace")
        same = [
            t
            for t in ledger.transfers
            if (t.from_pid, t.from_fd, t.to_pid, t.to_fd) == (producer, exported, pid, got)
        ]
        check(
            f"{role} same file",
            len(same) == 1,
            f"pid {producer} fd {exported} ≡ pid {pid} fd {got} (the kernel's struct file)",
        )
        handle = states.get((role, "import"), {}).get("mapping", {}).get("handle")
        if backend == "cuda":
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
    if backend == "cuda":
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
    for what, ok, detail in rows:
        print(f"{'agree   ' if ok else 'DISAGREE'} {what:32} {detail}")
    bad = sum(not ok for _, ok, _ in rows)
    print(f"{len(rows) - bad}/{len(rows)} agree ({backend})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
