"""The words for the trace's events and the ledger's findings, written once (console, --json
readers' transcripts, the attach view's log). Names from the traced processes go through
``vmmtui.names.shown``. No Textual: rich ``Text`` with semantic styles."""

from __future__ import annotations

from dataclasses import dataclass, field

from rich.text import Text

from vmmtui.events import Event
from vmmtui.names import shown
from vmmtui.sizes import format_size
from vmmtui.trace.cuda import base_name
from vmmtui.trace.events import (
    CallRefused,
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    FdTaken,
    LedgerFinding,
    MemfdCreated,
    PidfdOpened,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    QueuedAtRelease,
    TraceCall,
    TraceFinished,
    TraceLost,
    TraceStarted,
)
from vmmtui.trace.ledger import CUDA_ERRORS, handle_type_names, socket_words

FINDING_STYLES = {
    "shared": ("✓", "green"),
    "imported": ("✓", "green"),
    "refused": ("✗", "bold red"),
}


def _errno(v: int) -> str:
    import errno
    import os

    return f"-{errno.errorcode.get(-v, str(-v))} ({os.strerror(-v)})"


def _result(v: int) -> str:
    return _errno(v) if v < 0 else str(v)


def _file(f: str) -> str:
    return f" [file {f}]" if f else ""


def _not_read(n: int) -> str:
    """The fds of a message that no record held: counted, never guessed."""
    return f" (+ {n} more fd{'s' if n != 1 else ''} not read)" if n > 0 else ""


def call_words(e: Event) -> str | None:
    """What the call did, in one phrase (None: not a call)."""
    if isinstance(e, FdsSent):
        fds = ", ".join(f"{fd}{_file(f)}" for fd, f in zip(e.fds, e.files, strict=False))
        return (
            f"{e.call} over {shown(socket_words(e.sock))}: SCM_RIGHTS fd {fds}"
            f"{_not_read(e.fds_not_read)} → {_result(e.result)}"
        )
    if isinstance(e, FdsReceived):
        fds = ", ".join(f"{fd}{_file(f)}" for fd, f in zip(e.fds, e.files, strict=False))
        return (
            f"{e.call} over {shown(socket_words(e.sock))}: SCM_RIGHTS → new fd {fds}"
            f"{_not_read(e.fds_not_read)}"
        )
    if isinstance(e, QueuedAtRelease):
        files = ", ".join(f"file {f}" for f in e.files)
        return (
            f"{e.count} fd{'s' if e.count != 1 else ''} freed unreceived, still queued on the "
            f"socket (sender's inode {e.socket_file}) when it was released: {files}"
            f"{_not_read(e.count - len(e.files))}"
        )
    if isinstance(e, PidfdOpened):
        return f"pidfd_open({e.target}) → {'pidfd ' + str(e.fd) if e.fd >= 0 else _errno(e.fd)}"
    if isinstance(e, FdTaken):
        got = f"fd {e.fd}{_file(e.file)}" if e.fd >= 0 else _errno(e.fd)
        return f"pidfd_getfd(pidfd {e.pidfd} = pid {e.target or '?'}, fd {e.target_fd}) → {got}"
    if isinstance(e, FdCloseCall):
        if e.call == "close_range":
            return f"close_range({e.fd}, {e.last}) → {_result(e.result)}"
        return f"close({e.fd}){_file(e.file)} → {_result(e.result)}"
    if isinstance(e, FdDuplicated):
        return (
            f"{e.call}({e.old}) → {'fd ' + str(e.fd) if e.fd >= 0 else _errno(e.fd)}{_file(e.file)}"
        )
    if isinstance(e, MemfdCreated):
        got = f"fd {e.fd}{_file(e.file)}" if e.fd >= 0 else _errno(e.fd)
        return f'memfd_create("{shown(e.name)}") → {got}'
    if isinstance(e, ProcessForked):
        return f"fork → pid {e.child} (followed)"
    if isinstance(e, ProcessExec):
        return f"exec {shown(e.filename)}"
    if isinstance(e, ProcessExit):
        return (
            f"exit (status {e.code >> 8 if not e.code & 0x7F else 'signal ' + str(e.code & 0x7F)})"
        )
    if isinstance(e, CudaCall):
        return cuda_words(e)
    return None


def cuda_words(e: CudaCall) -> str:
    f = base_name(e.func)
    res = "CUDA_SUCCESS" if e.result == 0 else CUDA_ERRORS.get(e.result, f"CUresult {e.result}")
    args = ""
    if f == "cuMemCreate":
        args = f"{format_size(e.size)}, device {e.device}, {'+'.join(handle_type_names(e.handle_types))} → handle {e.handle:#x}"
    elif f == "cuMemExportToShareableHandle":
        out = f"fd {e.fd}" if e.fd >= 0 else (f"fabric {e.ipc[:16]}…" if e.ipc else "-")
        args = f"handle {e.handle:#x}, {'+'.join(handle_type_names(e.handle_types))} → {out}"
    elif f == "cuMemImportFromShareableHandle":
        args = f"fd {e.fd} → handle {e.handle:#x}"
    elif f == "cuMemMap":
        args = f"{e.ptr:#x}, {format_size(e.size)}, handle {e.handle:#x}"
    elif f in ("cuMemUnmap", "cuMemSetAccess"):
        args = f"{e.ptr:#x}, {format_size(e.size)}" + (
            f", device {e.device}, flags {e.flags}" if f == "cuMemSetAccess" else ""
        )
    elif f == "cuMemRelease":
        args = f"handle {e.handle:#x}"
    elif f == "cuIpcGetMemHandle":
        args = f"{e.ptr:#x} → handle {e.ipc[:16]}…"
    elif f == "cuIpcOpenMemHandle":
        args = f"handle {e.ipc[:16]}… → {e.ptr:#x}"
    elif f in ("cuIpcCloseMemHandle", "cuMemFree"):
        args = f"{e.ptr:#x}"
    elif f == "cuMemAlloc":
        args = f"{format_size(e.size)} → {e.ptr:#x}"
    elif f == "cuMemPoolCreate":
        args = (
            f"device {e.device}, {'+'.join(handle_type_names(e.handle_types))} → pool {e.handle:#x}"
        )
    elif f == "cuMemAllocFromPoolAsync":
        args = f"{format_size(e.size)}, pool {e.handle:#x} → {e.ptr:#x}"
    elif f == "cuMemPoolExportToShareableHandle":
        out = f"fd {e.fd}" if e.fd >= 0 else "-"
        args = f"pool {e.handle:#x}, {'+'.join(handle_type_names(e.handle_types))} → {out}"
    elif f == "cuMemPoolImportFromShareableHandle":
        args = f"fd {e.fd} → pool {e.handle:#x}"
    elif f == "cuMemPoolExportPointer":
        args = f"{e.ptr:#x} → export data {e.ipc[:16]}…"
    elif f == "cuMemPoolImportPointer":
        args = f"pool {e.handle:#x}, export data {e.ipc[:16]}… → {e.ptr:#x}"
    elif f == "cuMemFreeAsync":
        args = f"{e.ptr:#x}"
    elif f == "cuMemPoolDestroy":
        args = f"pool {e.handle:#x}"
    return f"{e.func}({args}) → {res} ({e.duration_ns / 1e3:.0f} µs)"


def who(pid: int, comm: str = "") -> str:
    return f"{shown(comm, 16)}[{pid}]" if comm else f"[{pid}]"


def lines(e: Event, t0: int = 0, comm: str = "") -> list[Text]:
    """The lines for one event (a call, a finding, the start or the end)."""
    if isinstance(e, TraceStarted):
        out = [
            Text(
                f"vmmtui trace: eBPF, {'every process' if e.everything else 'pids ' + ', '.join(map(str, e.targets)) if e.targets else shown(' '.join(e.command))}",
                "bold",
            )
        ]
        out += [Text(f"  probes: {shown(p, 400)}", "dim") for p in e.probes]
        out += [Text(f"  not probed: {shown(p, 400)}", "yellow") for p in e.unprobed]
        return out
    if isinstance(e, LedgerFinding):
        mark, style = FINDING_STYLES.get(e.kind, ("⚠", "yellow"))
        text = Text(f"    {mark} {e.kind}: pid {e.pid} {e.what}: {shown(e.detail, 400)}", style)
        if e.fix:
            text.append(f" — fix: {e.fix}", "dim")
        return [text]
    if isinstance(e, CallRefused):
        return [
            Text(
                f"    ✗ {e.call} refused ({e.errno}): {shown(e.cause, 600)} — fix: {e.fix}",
                "bold red",
            )
        ]
    if isinstance(e, TraceLost):
        where = ""
        if e.cpu >= 0 and t0 and e.t_first_ns >= t0:
            where = (
                f" on CPU {e.cpu} between {(e.t_first_ns - t0) / 1e9:.4f} and "
                f"{(e.t_last_ns - t0) / 1e9:.4f} s"
            )
        return [
            Text(
                f"⚠ {e.count} records lost{where} (the ring buffer was full): the ledger may "
                "miss calls",
                "bold yellow",
            )
        ]
    if isinstance(e, TraceFinished):
        how = (
            f"signal {e.signal}"
            if e.signal
            else (f"exit {e.returncode}" if e.returncode is not None else "")
        )
        return [
            Text(
                f"vmmtui trace: {e.events} calls in {e.seconds:.1f} s, {e.lost} lost, "
                f"{e.findings} findings" + (f"; the command ended with {how}" if how else ""),
                "bold",
            )
        ]
    words = call_words(e)
    if words is None or not isinstance(e, TraceCall):
        return []
    t = (e.ktime - t0) / 1e9 if t0 and e.ktime >= t0 else 0.0
    style = "red" if _failed(e) else ""
    return [Text(f"{t:9.4f} {who(e.pid, comm):>24} {words}", style)]


def _failed(e: Event) -> bool:
    if isinstance(e, CudaCall):
        return e.result != 0
    for name in ("fd", "result"):
        v = getattr(e, name, 0)
        if isinstance(v, int) and v < 0 and not (name == "fd" and isinstance(e, FdCloseCall)):
            return True
    return False


def worth_a_line(e: Event, ledger) -> bool:
    """Plain output and the view leave out closes and dups of fds that never held shared memory;
    --json and --record keep every call. ``ledger`` is the state before ``e``."""
    if isinstance(e, FdCloseCall):
        if e.call == "close_range":
            return any(p == e.pid and e.fd <= fd <= e.last for p, fd in ledger.holdings)
        return (e.pid, e.fd) in ledger.holdings
    if isinstance(e, FdDuplicated):
        return (e.pid, e.old) in ledger.holdings
    return True


@dataclass
class ProcessNames:
    """The trace's clock origin and the name it knows for each process, from the forks, execs and
    exits it saw: the live trace and the replay of its recording name processes alike."""

    t0: int = 0
    comms: dict[int, str] = field(default_factory=dict)

    def see(self, e: Event) -> None:
        if isinstance(e, TraceStarted):
            self.t0 = e.ktime0
        elif isinstance(e, ProcessForked):
            self.comms[e.child] = e.comm
        elif isinstance(e, ProcessExec):
            self.comms[e.pid] = e.comm
        elif isinstance(e, ProcessExit) and not self.comms.get(e.pid):
            self.comms[e.pid] = e.comm  # gone from /proc by now: the kernel's name at exit
