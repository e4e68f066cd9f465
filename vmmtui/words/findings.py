"""A finding in words: what, the detail and the fix, made from its kind and its facts, once, for
every renderer (the trace's text lines, the inspector, fleet, the JSON written of a recording).
The ledger and the views keep findings as data; only this module words them."""

from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring as _text
from typing import Any

from vmmtui.model.ends import End
from vmmtui.model.entries import Pin
from vmmtui.model.findings import RELEASED_LATE, Memory, Proof
from vmmtui.stream.events import Event, Leak, Notice, ProcessUnreadable
from vmmtui.stream.names import json_safe, shown
from vmmtui.stream.observed import LedgerFinding, SocketEnd
from vmmtui.stream.sizes import format_size
from vmmtui.words.cuda import cuda_cause, cuda_fix
from vmmtui.words.leaks import said as leak_words
from vmmtui.words.programs import ended_words, socket_words
from vmmtui.words.refusals import worded as refusal_words
from vmmtui.words.troubleshooting import close_fix


@dataclass(frozen=True)
class Said:
    """A finding's words: one line of what, the detail that proves or explains it, the fix."""

    what: str
    detail: str
    fix: str = ""


IN_FLIGHT_FIX = "receive it (recvmsg with room for SCM_RIGHTS) before closing the socket"
DROPPED_FIX = (
    "receive fd-carrying messages with recvmsg and a control buffer (CMSG_SPACE for every fd)"
)
LOST_FIX = "trace again with fewer calls per second, or a larger ring buffer"


def road_words(via: str, sock: SocketEnd | None = None, pidfd: int = -1) -> str:
    """How an fd came: ``unix socket /run/x (inode 5)``, ``pidfd_getfd through pidfd 4``, or the
    call (``fork``, ``dup2``, ``cuMemExportToShareableHandle``)."""
    if sock is not None:
        return socket_words(sock)
    if via == "pidfd_getfd" and pidfd >= 0:
        return f"pidfd_getfd through pidfd {pidfd}"
    if via == "driver-dup":  # model/exits.py: libcuda dup'ed it inside its own call
        return "dup by the driver"
    return via


def pin_words(p: Pin) -> str:
    """``pid 5: fd 7 (received)``, ``pid 5: imported handle 0x2``…"""
    if p.what == "handle":
        return f"pid {p.pid}: its handle {p.value:#x} (not released)"
    if p.what == "fd":
        return f"pid {p.pid}: fd {p.value} ({p.how})"
    if p.what == "exported fd":
        return f"pid {p.pid}: exported fd {p.value}"
    if p.what == "import":
        return f"pid {p.pid}: imported handle {p.value:#x}"
    return f"pid {p.pid}: mapping at {p.value:#x}"


def shown_kind(target: str) -> str:
    """A file's target as a phrase: ``memfd:x`` (``/memfd:x (deleted)`` as /proc says it) is
    "memfd x"; a path keeps its leading slash (``/dev/shm/x``)."""
    if target.startswith("/memfd:"):
        target = target[1:]
    return target.replace("memfd:", "memfd ", 1).removesuffix(" (deleted)")


def _ended(f: LedgerFinding) -> str:
    return ended_words(End.of_status(f.status) if f.status >= 0 else None)


def _shared(f: LedgerFinding) -> Said:
    if f.via == "kcmp":
        return Said(
            f"fd {f.fd} = pid {f.peer}'s fd {f.peer_fd}",
            f"one open {f.name} file, the same description in both (kcmp)",
        )
    if f.via == "pidfd_getfd":
        return Said(
            f"fd {f.fd} = pid {f.peer}'s fd {f.peer_fd}",
            f"taken with pidfd_getfd (pidfd {f.pidfd}), same open file",
        )
    over = road_words(f.via, f.sock)
    if not f.peer:
        return Said(f"fd {f.fd} received", f"over {over} from a process not traced")
    gap = f.gap_ns / 1e6
    return Said(
        f"fd {f.fd} = pid {f.peer}'s fd {f.peer_fd}",
        f"SCM_RIGHTS over {over}, same open file, "
        + (f"{gap:.3f} ms after the send" if gap >= 0 else "the send ended after it"),
    )


def _imported(f: LedgerFinding) -> Said:
    if f.memory == Memory.IPC:
        who = (
            f"pid {f.peer}'s memory at {f.peer_ptr:#x}"
            if f.peer
            else "a handle made by a process not traced"
        )
        return Said(f"IPC handle opened at {f.ptr:#x}", f"{who} (matched by the 64 handle bytes)")
    if f.memory == Memory.POOL:
        src = f"pid {f.peer}'s pool {f.peer_handle:#x}" if f.peer else "a pool not traced"
        return Said(
            f"fd {f.fd} imported as pool {f.handle:#x}", f"{src} (matched by the fd's open file)"
        )
    if f.memory == Memory.POOL_POINTER:
        who = (
            f"pid {f.peer}'s allocation at {f.peer_ptr:#x}"
            if f.peer
            else "a pointer exported by a process not traced"
        )
        return Said(
            f"pool pointer imported at {f.ptr:#x}", f"{who} (matched by the 64 export bytes)"
        )
    src = f"pid {f.peer}'s allocation {f.peer_handle:#x}" if f.peer else "an allocation not traced"
    return Said(
        f"fd {f.fd} imported as handle {f.handle:#x}",
        f"the memory of {src}" + (f" ({f.size} bytes)" if f.peer and f.size else ""),
    )


def _refused(f: LedgerFinding) -> Said:
    if f.refusal is not None:
        r = f.refusal
        return Said(f"{r.call} refused ({r.errno})", *refusal_words(r))
    if f.cuda is not None:
        c = f.cuda
        return Said(f"{c.func} failed (CUresult {c.result})", cuda_cause(c), cuda_fix(c))
    return Said(f"{f.via or 'a call'} refused", "")


def _held_after_exporter_died(f: LedgerFinding) -> Said:
    if f.how == "mapped" and f.memory != Memory.FILE:  # the book's: handle released, mapping kept
        return _mapping_after_exporter_died(f)
    ended = _ended(f)
    if f.memory == Memory.FILE and f.fd < 0:
        return Said(
            f"still maps pid {f.peer}'s memory",
            f"pid {f.peer} made the {shown_kind(f.name)} and {ended}; pid {f.pid} closed its fd "
            f"but its mapping at {f.ptr:#x} keeps the memory alive (mmap(2): closing the fd "
            "does not unmap the region)",
            "munmap when the exporter goes (watch its pidfd or socket)",
        )
    if f.memory == Memory.IPC:
        return Said(
            f"still maps pid {f.peer}'s memory (legacy IPC)",
            f"pid {f.peer} {ended}; pid {f.pid}'s IPC mapping at {f.ptr:#x} keeps the memory alive",
            "cuIpcCloseMemHandle when the exporter goes",
        )
    if f.memory == Memory.POOL_POINTER:
        return Said(
            f"still holds pid {f.peer}'s pool memory",
            f"pid {f.peer} (the exporter) {ended}; pid {f.pid}'s imported pool pointer "
            f"{f.ptr:#x} keeps the allocation alive",
            "cuMemFreeAsync the imported pointer when the exporter goes",
        )
    if f.memory == Memory.FILE:
        how = (
            f"inherited by fork from pid {f.through}, which received it via "
            if f.how == "inherited" and f.through
            else f"{f.how} via "
        )
        return Said(
            f"still holds pid {f.peer}'s memory",
            f"pid {f.peer} made the {shown_kind(f.name)} and {ended}; pid {f.pid}'s fd {f.fd} "
            f"({how}{road_words(f.via, f.sock, f.pidfd)}) keeps the memory alive: the "
            "kernel frees it only when the last fd and mapping go",
            "close the fd (and munmap) when the exporter goes (watch its pidfd or socket)",
        )
    return Said(
        f"still holds pid {f.peer}'s memory",
        f"pid {f.peer} (the exporter) {ended}; pid {f.pid}'s imported handle {f.handle:#x} keeps "
        f"the {f.size or '?'}-byte allocation alive (the driver frees it only when every handle "
        "is released)",
        "release the import when the exporter goes (watch its pidfd or socket)",
    )


#: how a pin's end is said: the call that let it go
_LET_GO = {
    "close": "close",
    "munmap": "munmap",
    "mremap": "mremap",
    "exec": "exec (its mappings went)",
    "exit": "its exit",
}


def _released_after_exporter_died(f: LedgerFinding) -> Said:
    held = (f.ktime - f.since) / 1e9
    pin = {
        "ipc": f"legacy IPC mapping at {f.ptr:#x}",
        "pool pointer": f"imported pool pointer {f.ptr:#x}",
        "allocation": f"imported handle {f.handle:#x}"
        + (f" ({format_size(f.size)})" if f.size else ""),
    }.get(f.memory, shown_kind(f.name) or "copy of the memory")
    by = _LET_GO.get(f.via, f.via)
    return Said(
        f"held pid {f.peer}'s memory {held:.1f} s after pid {f.peer} {_ended(f)}; released by {by}",
        f"pid {f.pid}'s {pin} kept pid {f.peer}'s memory alive {held:.2f} s after pid {f.peer} "
        f"{_ended(f)}; its last pin went by {by}: nothing of it is pinned now",
    )


def _held_at_exit(f: LedgerFinding) -> Said:
    if f.how == "inherited":
        return _inherited_at_exit(f)
    pins = [f"fd {fd}" for fd in f.fds] + [f"a mapping at {a:#x}" for a in f.opens]
    by = ", ".join(pins) or "a pin"
    kind = file_kind_words(f.name)
    return Said(
        f"{kind} of pid {f.peer} held until exit by {by}"
        if f.peer
        else f"{kind} held until exit by {by}",
        f"pid {f.pid} {'took' if f.how == 'taken' else 'received'} it"
        + (f" from pid {f.peer} (fd {f.peer_fd})" if f.peer else "")
        + f" via {road_words(f.via, f.sock, f.pidfd)} and closed that fd, but kept "
        + ("a copy of it (dup)" if f.fds else "it mapped")
        + ": the memory lives until the last fd and mapping go, so it lived as long as the process",
        "close every dup and munmap every mapping when done (a dup is the same open file)",
    )


def _inherited_at_exit(f: LedgerFinding) -> Said:
    """A copy of another's memory file that a process got by fork (a forkserver's child, a
    worker forked while its parent maps a batch) and kept until it exited: it never received
    it, its ancestor did; said as what it is, kept until exit and released by the exit."""
    pins = [f"fd {fd}" for fd in f.fds] + [f"a mapping at {a:#x}" for a in f.opens]
    by = ", ".join(pins) or "a pin"
    kind = file_kind_words(f.name)
    got = f"pid {f.through} received it" if f.through else "its ancestor received it"
    got += f" from pid {f.peer} (fd {f.peer_fd})" if f.peer else ""
    return Said(
        f"{kind} of pid {f.peer} kept until exit, inherited, by {by}"
        if f.peer
        else f"{kind} kept until exit, inherited, by {by}",
        f"pid {f.pid} inherited it by fork: {got} via {road_words(f.via, f.sock, f.pidfd)} "
        f"and forked while holding it (fork(2): the child gets copies of the fds and the "
        f"mappings); pid {f.pid} kept its copy (the fds and mappings fork gave it, and any "
        "dup of them) until it exited, and the exit released it",
        "nothing to do if the process keeps it for its life; else close the inherited fd and "
        "munmap in the child once done (or fork before taking the memory)",
    )


def _growth(f: LedgerFinding) -> Said:
    secs = max((f.ktime - f.since) / 1e9, 1e-9)
    counts = f.opens
    now = counts[-1] if counts else 0
    size = format_size(f.size) if f.size else "size not seen"
    rate = f", {format_size(int(f.size / secs))}/s" if f.size else ""
    steps = " → ".join(str(n) for n in counts)
    grew = "grew to a peak of" if f.how == "peak" else "grow:"  # the end says the peak
    return Said(
        f"pins on pid {f.peer}'s memory {grew} {now} held, {size}{rate}",
        f"pid {f.pid} took a new piece of pid {f.peer}'s memory each round and let none go "
        f"(pins at each round: {steps}, over {secs:.1f} s): a loop that keeps every buffer it "
        "is sent",
        "drop (close, munmap, release) each received buffer once the next is in use",
    )


def _possibly_held(f: LedgerFinding) -> Said:
    if f.fd < 0:  # found mapped when the trace began, no fd of it compared
        return Said(
            f"still maps memory it shared with pid {f.peer}",
            f"pid {f.peer} {_ended(f)}; pid {f.pid} maps {shown_kind(f.name)}, which pid {f.peer} "
            "held too when the trace began (/proc/PID/maps), and the mapping keeps the memory "
            "alive; which of them made it was not seen, nor an munmap since",
            f"if pid {f.peer} exported it, munmap it in pid {f.pid} when pid {f.peer} goes",
        )
    return Said(
        f"still holds memory it shared with pid {f.peer}",
        f"pid {f.peer} {_ended(f)}; pid {f.pid}'s fd {f.fd} ({shown_kind(f.name)}) is the same "
        f"open file as pid {f.peer}'s fd {f.peer_fd} (kcmp, when the trace began) and keeps the "
        "memory alive; which of them made it was not seen (they shared it before the trace began)",
        f"if pid {f.peer} exported it, close the fd (and munmap) in pid {f.pid} when it goes",
    )


def _in_flight(f: LedgerFinding) -> Said:
    if f.fd < 0:
        return Said(
            "an fd sent, never received",
            "its send was not seen; the kernel released the socket with it still queued (no "
            "process received it)",
            IN_FLIGHT_FIX,
        )
    if f.peer and f.how == "exit":  # the receiver ended with it queued: its exit released it
        return Said(
            f"fd {f.fd} sent, never received: pid {f.peer} exited first",
            f"pid {f.pid} sent fd {f.fd} over {road_words('SCM_RIGHTS', f.sock)}; pid {f.peer} "
            "exited with it still queued and the kernel closed it with the socket (no process "
            "received it, nothing of it is held)",
            "if the message mattered, have the receiver read its socket until it closes before "
            "it exits (or the sender stop sending once it is told the receiver goes)",
        )
    released = f"pid {f.peer} closed the socket" if f.peer else "the kernel released the socket"
    return Said(
        f"fd {f.fd} sent, never received",
        f"pid {f.pid} sent fd {f.fd} over {road_words('SCM_RIGHTS', f.sock)}; {released} "
        "with it still queued (no process received it)",
        IN_FLIGHT_FIX,
    )


def _dropped(f: LedgerFinding) -> Said:
    who = (
        f"pid {f.peer} sent fd {f.peer_fd} over {road_words('SCM_RIGHTS', f.sock)}"
        if f.peer
        else "sent"
    )
    return Said(
        f"fd {f.peer_fd} of pid {f.peer} dropped by {f.via}()"
        if f.peer
        else f"an fd dropped by {f.via}()",
        f"{who}; pid {f.pid} read the message with {f.via}(), which has no room for SCM_RIGHTS, "
        "so the kernel closed the fd: it was never received",
        DROPPED_FIX,
    )


def _came(f: LedgerFinding) -> str:
    return (
        f"pid {f.pid} {'took' if f.how == 'taken' else f.how} it"
        + (f" from pid {f.peer} (fd {f.peer_fd})" if f.peer else "")
        + f" via {road_words(f.via, f.sock, f.pidfd)}"
    )


def _never_closed(f: LedgerFinding) -> Said:
    what = (
        f"a {file_kind_words(f.name)}: the memory it carries lived as long as the process"
        if f.name
        else "a file whose kind the trace did not see (its send was not traced): it may carry "
        "memory"
    )
    return Said(
        f"fd {f.fd} ({file_kind_words(f.name)}) held until exit"
        if f.name
        else f"fd {f.fd} held until exit",
        f"{_came(f)} and never closed it; the exit closed it. It is {what}",
        close_fix(f.name),
    )


def _closed_by_exit(f: LedgerFinding) -> Said:
    kind = file_kind_words(f.name)
    return Said(
        f"fd {f.fd} ({kind}) held until exit",
        f"{_came(f)} and kept it until it exited, as servers and browsers keep their channels: "
        f"a {kind} carries no memory, so this is a fact, not a leak",
    )


#: what a file's kind (``trace.records.file_kind``) is called, one and many
_FILE_KINDS = {
    "socket": ("socket", "sockets"),
    "pipe": ("pipe", "pipes"),
    "pidfd": ("pidfd", "pidfds"),
    "anon inode": ("anon inode (eventfd, epoll, timerfd…)", "anon inodes"),
    "file": ("file on disk", "files on disk"),
    "directory": ("directory", "directories"),
    "memfd": ("memfd", "memfds"),
    "shm": ("/dev/shm file", "/dev/shm files"),
    "dmabuf": ("dma-buf", "dma-bufs"),
    "gpu": ("GPU fd (/dev/nvidia*, a driver export)", "GPU fds"),
}


def file_kind_words(kind: str, many: bool = False) -> str:
    """A file's kind in words: ``socket``, ``pipes``; a kind read from a recording, sanitised."""
    known = _FILE_KINDS.get(kind)
    if known is not None:
        return known[many]
    return shown(kind, 32) if kind else "file of a kind not seen"


def _facts_named(fact: str, n: int) -> str:
    """A fact the policy counts under its own name (``policy.Fact``), as the end line says it;
    "" for a kind of file (a received fd of a file that carries no memory)."""
    from vmmtui.model.policy import TEARDOWN_WINDOW_S, Fact

    s = "" if n == 1 else "s"
    said: dict[str, str] = {
        Fact.HELD_UNTIL_EXIT: f"{n} held until exit, released by it",
        Fact.RELEASED_BY_EXIT: f"{n} CUDA import{s} released by the importer's exit",
        Fact.RELEASED_LATE: f"{n} hold{s} {RELEASED_LATE} (said above)",
        Fact.TORN_DOWN: f"{n} legacy free{s} let go by the importer within the teardown window",
        Fact.WITHIN_WINDOW: f"{n} hold{s} after the exporter ended, let go within the "
        f"{TEARDOWN_WINDOW_S:g} s teardown window",
        Fact.WINDOW_OPEN: f"{n} hold{s} after the exporter ended still inside the "
        f"{TEARDOWN_WINDOW_S:g} s teardown window when the trace ended",
        Fact.NEVER_IMPORTED: f"{n} export{s} never imported (the exporter's own memory)",
        Fact.EXPORTER_ENDED: f"{n} exporter{s} ended",
        Fact.NOT_READ: f"{n} process{'' if n == 1 else 'es'} not read",
        Fact.STALE_SOCKET: f"{n} stale socket file{s}",
        Fact.QUEUED_AT_EXIT: f"{n} fd{s} sent, still queued when the receiver exited (closed "
        "by the kernel, nothing held)",
        Fact.UNDECIDED: f"{n} unknown (records lost could overturn {'it' if n == 1 else 'them'})",
    }
    return said.get(fact, "")


def quiet_words(n: int, by: dict[str, int]) -> str:
    """The quiet facts folded into one phrase, never "to look at": ``33 held until exit,
    released by it; 45 other received fds held until exit: 30 sockets, 12 pipes, 3 files on
    disk``."""
    if not n:
        return ""
    named = [(k, c, w) for k, c in by.items() if (w := _facts_named(k, c))]
    files = sorted(
        ((k, c) for k, c in by.items() if not _facts_named(k, c)),
        key=lambda kv: (-kv[1], kv[0]),
    )
    said = [w for _, _, w in sorted(named, key=lambda x: (-x[1], x[0]))]
    fds = sum(c for _, c in files)
    if fds:
        kinds = ", ".join(f"{c} {file_kind_words(k, many=c != 1)}" for k, c in files[:5])
        more = f", {len(files) - 5} more kinds" if len(files) > 5 else ""
        said.append(
            f"{fds} other received fd{'s' if fds != 1 else ''} held until exit"
            + (f": {kinds}{more}" if kinds else "")
        )
    return "; ".join(said)


def _import_never_released(f: LedgerFinding) -> Said:
    return Said(
        f"imported handle {f.handle:#x} never released",
        "the process exited holding it"
        + (f" (pid {f.peer}'s allocation {f.peer_handle:#x})" if f.peer else ""),
        "cuMemUnmap and cuMemRelease every imported handle before exit",
    )


def _ipc_never_closed(f: LedgerFinding) -> Said:
    return Said(
        f"IPC mapping at {f.ptr:#x} never closed",
        "the process exited with cuIpcOpenMemHandle's mapping open"
        + (f" (pid {f.peer}'s memory)" if f.peer else ""),
        "cuIpcCloseMemHandle (cudaIpcCloseMemHandle) before exit",
    )


def _pool_pointer_never_freed(f: LedgerFinding) -> Said:
    return Said(
        f"imported pool pointer {f.ptr:#x} never freed",
        "the process exited holding it"
        + (f" (pid {f.peer}'s allocation at {f.peer_ptr:#x})" if f.peer else ""),
        "cuMemFreeAsync every imported pointer (and synchronize) before the exporter frees it "
        "and before exit",
    )


def _pool_never_destroyed(f: LedgerFinding) -> Said:
    return Said(
        f"{f.how} pool {f.handle:#x} never destroyed",
        "the process exited with the pool alive"
        + (f" (imported from pid {f.peer}'s pool)" if f.peer else ""),
        "cuMemPoolDestroy every pool (created or imported) before exit",
    )


def _sends_unseen(f: LedgerFinding) -> Said:
    n = len(f.fds)
    fds = ", ".join(str(fd) for fd in f.fds[:8]) + (" …" if n > 8 else "")
    return Said(
        f"{n} fd{'s' if n != 1 else ''} sent (fd {fds}), receive not seen",
        "their receive, or the kernel's word that they were left queued, may be among the "
        "records lost",
        LOST_FIX,
    )


# -- the refcount book's facts (model/handles.py) ------------------------------------------------
_THING = {"allocation": "allocation", "ipc": "legacy IPC handle", "pool-ptr": "pool pointer"}


def _proved(f: LedgerFinding) -> str:
    if f.proof == Proof.STRUCT_FILE:
        return "the export's fd, matched to the import by the kernel's struct file"
    if f.proof == Proof.HANDLE_BYTES:
        return f"the 64 handle bytes {f.ipc[:16]}…" if f.ipc else "the handle bytes"
    if f.proof == Proof.EXPORT_DATA:
        return f"the 64 export bytes {f.ipc[:16]}…" if f.ipc else "the export data"
    return "the handle value the driver returned"


def _size(n: int) -> str:
    return f"{n} bytes" if n else "size not seen"


def _opened_twice(f: LedgerFinding) -> Said:
    thing = _THING.get(f.memory, f.memory)
    if f.result:
        return Said(
            f"opened pid {f.peer}'s {thing} a second time while it maps it at {f.handle:#x}",
            f"the driver refused the second cuIpcOpenMemHandle (CUDA_ERROR_ALREADY_MAPPED: one "
            f"open per handle per context; proved by {_proved(f)}, open since the first); "
            "code that opens per use and closes once leaks or fails here",
            "keep one open per handle in the process and share its pointer (count the users, "
            "cuIpcCloseMemHandle when the last goes)",
        )
    opens = ", ".join(f"{k:#x}" for k in f.opens)
    return Said(
        f"holds {len(f.opens)} opens of pid {f.peer}'s {thing} {f.peer_handle:#x} ({opens})",
        f"opened {len(f.opens)} times, closed {f.closes} so far; proved by {_proved(f)}; "
        "each open is a reference the driver counts: one close leaves the memory pinned",
        "open once and share the mapping within the process, or release every open "
        "(cuMemRelease / cuIpcCloseMemHandle once per open)",
    )


def _never_imported(f: LedgerFinding) -> Said:
    thing = _THING.get(f.memory, f.memory)
    waited = f"no traced process opened it in {(f.ktime - f.since) / 1e9:.1f} s"
    if f.memory == "allocation":
        return Said(
            f"exported {thing} {f.handle:#x}, never imported",
            f"{waited} ({_size(f.size)}; proved by {_proved(f)} never seen at an import); "
            "the exported handle pins the memory as long as any copy of the fd lives",
            "close the exported fd (every copy sent) when no importer comes",
        )
    return Said(
        f"exported {thing} {f.handle:#x}, never imported",
        f"{waited} ({_size(f.size)}; proved by {_proved(f)} never seen at an open): the "
        "bytes reached no traced importer (a lost handoff, or an importer not traced)",
        "check that the receiver got the 64 bytes and opened them (or trace it too)",
    )


def _released_twice(f: LedgerFinding) -> Said:
    call = "cuMemRelease" if f.memory == "allocation" else (
        "cuIpcCloseMemHandle" if f.memory == "ipc" else "cuMemFreeAsync"
    )  # fmt: skip
    return Said(
        f"{call}({f.handle:#x}) a second time",
        f"the same {'handle' if f.memory == 'allocation' else 'pointer'} was released "
        f"{(f.ktime - f.since) / 1e6:.3f} ms earlier (proved by the handle value the driver "
        "returned and the first release's call)",
        "release each handle once: drop your reference after the first release",
    )


def _freed_while_mapped(f: LedgerFinding) -> Said:
    thing = _THING.get(f.memory, f.memory)
    opens = f"{len(f.opens)} open{'s' if len(f.opens) != 1 else ''}" if f.opens else "a mapping"
    if f.memory != "allocation" and f.gap_ns:  # a legacy free, said past the teardown window
        later = f"{f.gap_ns / 1e9:.2f} s after the free"
        held = (
            f"pid {f.peer} still held it {later}"
            if not f.via
            else f"pid {f.peer} {'closed its handle' if f.via == 'closed' else 'exited'} only "
            f"{later}"
        )
        return Said(
            f"freed its exported {thing} {f.handle:#x} while pid {f.peer} holds it",
            f"{held} ({opens}, {_size(f.size)}; proved by {_proved(f)}): the importer's "
            "mapping points at freed memory (a cuMemFree before the importer's "
            "cuIpcCloseMemHandle is undefined behaviour by the CUDA docs)",
            "wait for the importer's cuIpcCloseMemHandle (a message back) before cuMemFree",
        )
    return Said(
        f"released its exported {thing} {f.handle:#x} while pid {f.peer} holds it",
        f"pid {f.peer} holds {opens} ({_size(f.size)}; proved by {_proved(f)}): "
        + (
            "the memory stays pinned until it releases"
            if f.memory == "allocation"
            else "the importer's mapping now points at freed memory"
        ),
        "wait for the importer's release (a message back) before freeing the export",
    )


def _freed_at_teardown(f: LedgerFinding) -> Said:
    """The past of a legacy free its importer let go within the teardown window: a fact."""
    went = "closed its handle" if f.via == "closed" else "exited"
    return Said(
        f"freed {f.handle:#x} {f.gap_ns / 1e9:.2f} s before pid {f.peer} {went}",
        "both sides tore down together (the CUDA docs leave any use in between undefined; "
        f"no access can be seen): {_size(f.size)}, proved by {_proved(f)}",
    )


def _legacy_export_of_vmm(f: LedgerFinding) -> Said:
    return Said(
        f"cuIpcGetMemHandle({f.handle:#x}) on memory mapped with cuMemMap",
        f"the pointer lies in the range mapped at {f.since:#x} from handle {f.peer_handle:#x} "
        f"({_size(f.size)}): legacy IPC cannot export VMM memory (CUDA_ERROR_INVALID_VALUE)",
        "export the allocation's handle as a POSIX fd (cuMemExportToShareableHandle, "
        "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and send it over a Unix socket, or use "
        "torch's expandable-segments IPC",
    )


def _mapping_after_exporter_died(f: LedgerFinding) -> Said:
    return Said(
        f"still maps pid {f.peer}'s memory at {f.handle:#x}",
        f"pid {f.peer} (the exporter) exited; pid {f.pid} released its imported handle but its "
        f"mapping of allocation {f.peer_handle:#x} ({_size(f.size)}; proved by {_proved(f)}) "
        "keeps the memory alive",
        "cuMemUnmap the range when the exporter goes (watch its pidfd or socket)",
    )


WORDS = {
    "shared": _shared,
    "imported": _imported,
    "refused": _refused,
    "in-flight": _in_flight,
    "fds-dropped": _dropped,
    "fd-never-closed": _never_closed,
    "fd-closed-by-exit": _closed_by_exit,
    "import-never-released": _import_never_released,
    "held-after-exporter-died": _held_after_exporter_died,
    "possible-held-after-exporter-died": _possibly_held,
    "released-after-exporter-died": _released_after_exporter_died,
    "held-at-exit": _held_at_exit,
    "growth": _growth,
    "ipc-never-closed": _ipc_never_closed,
    "pool-pointer-never-freed": _pool_pointer_never_freed,
    "pool-never-destroyed": _pool_never_destroyed,
    "opened-twice": _opened_twice,
    "exported-never-imported": _never_imported,
    "released-twice": _released_twice,
    "freed-while-mapped": _freed_while_mapped,
    "freed-at-teardown": _freed_at_teardown,
    "legacy-export-of-vmm": _legacy_export_of_vmm,
}


def finding_words(f: LedgerFinding) -> Said:
    """The finding in words. An ``unknown`` says what it would be without the records lost."""
    if f.kind == "unknown":
        if not f.was:
            return _sends_unseen(f)
        inner = finding_words_of_kind(f.was, f)
        return Said(
            inner.what,
            f"would be {f.was} ({inner.detail}), but a lost record may say otherwise",
        )
    return finding_words_of_kind(f.kind, f)


def finding_words_of_kind(kind: str, f: LedgerFinding) -> Said:
    words = WORDS.get(kind)
    return words(f) if words is not None else Said(kind, "")


def words_of(e: LedgerFinding | Leak | ProcessUnreadable) -> Said:
    """Any finding the screen lists in words: the ledger's, made from its facts; polling's leak,
    as polling said it; a process polling could not read."""
    if isinstance(e, LedgerFinding):
        return finding_words(e)
    if isinstance(e, Leak):
        return Said(*leak_words(e))
    return Said("not readable", e.reason)


def worded(e: Event) -> dict[str, Any]:
    """The event's JSON object; a finding's words (what, detail, fix) with it, made now."""
    data = e.to_dict()
    if isinstance(e, LedgerFinding):
        said = finding_words(e)
        data.update(what=said.what, detail=said.detail, fix=said.fix)
    return data


#: the last event made into a line, with its line: the stream's reader (``--json``) and the
#: recording each ask for the same event's line, one after the other (read and rebound whole:
#: another thread sees the pair or the one before it, never half)
_LAST: tuple[Event | None, str] = (None, "")


def json_line(e: Event) -> str:
    """``line_of_event`` of ``e``, made once for its readers one after the other (``_LAST``)."""
    global _LAST
    last = _LAST
    if last[0] is e:
        return last[1]
    line = line_of_event(e)
    _LAST = (e, line)
    return line


def line_of_event(e: Event) -> str:
    """One event as one JSON line, what ``Event.from_json`` reads back (the words of a finding
    are read past: they are made again from its facts). A finding's line is ``line_of(worded(e))``
    written as its fields' own line (``to_json``: no dict, no encoder) with the words' three keys
    appended: a trace writes one for every share, and going through the encoder cost as much as
    the rest of the event's path."""
    if isinstance(e, Leak):  # its facts, and their words for a reader of the file
        from dataclasses import replace

        what, detail, fix = leak_words(e)
        return replace(e, what=what, detail=detail, fix=fix or close_fix(e.memory)).to_json()
    if isinstance(e, Notice) and e.code and not e.text:  # its words too, for a reader of the file
        from dataclasses import replace

        from vmmtui.words.notices import text_of

        return replace(e, text=text_of(e)).to_json()
    if not isinstance(e, LedgerFinding):
        return e.to_json()
    said = finding_words(e)
    words = f',"what":{_text(said.what)},"detail":{_text(said.detail)},"fix":{_text(said.fix)}}}'
    return e.to_json()[:-1] + json_safe(words)
