"""The events ``vmmtui trace`` emits: each call the kernel (eBPF) saw, and the ledger's verdicts.

They join the one event stream (``vmmtui.stream.events.Event`` registers every subclass by name), so
``--json``, ``--record`` and ``vmmtui replay`` carry them like a session's events. Every call event
holds the process (``pid``: the tgid), the thread (``tid``) and the kernel's monotonic clock in
nanoseconds (``ktime``). Open files are named by ``file``: a per-run keyed hash of the kernel's
``struct file *`` (the pointer itself is never shown), so the fd a sender sent and the fd its
receiver got are matched exactly, whatever their numbers. Names from the traced processes (comm,
memfd names, socket paths) are untrusted: renderers show them through ``vmmtui.stream.names.shown``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from json.encoder import encode_basestring as _text
from typing import Any

from vmmtui.stream.events import _ENCODE, VERSION, AttachEvent

#: the kinds of open file that carry memory (``trace.records.file_kind``'s names, the ledger's and
#: polling's): a received fd of one kept until exit keeps that memory alive until then
MEMORY_FILES = frozenset({"gpu", "memfd", "shm", "dmabuf"})

_FIELDS: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    """A dataclass's field names, read once per class (the fast path of serialising)."""
    if cls not in _FIELDS:
        _FIELDS[cls] = tuple(f.name for f in fields(cls))
    return _FIELDS[cls]


def _plain(value: Any) -> dict[str, Any]:
    """A trace event (or a small dataclass in one) as JSON-ready values: fields are numbers, text,
    lists of those, or small dataclasses (one level of recursion)."""
    out = {}
    for name in _names(type(value)):
        v = getattr(value, name)
        t = type(v)
        if t is int or t is str or t is bool or v is None:  # most fields: no further look
            out[name] = v
            continue
        if isinstance(v, list):
            v = [_plain(x) if hasattr(x, "__dataclass_fields__") else x for x in v]
        elif hasattr(v, "__dataclass_fields__"):
            v = _plain(v)
        out[name] = v
    return out


def _value(v: Any) -> Any:
    """A field that is not a plain scalar: a list (of values or small dataclasses), a dataclass."""
    if isinstance(v, list):
        return [_plain(x) if hasattr(x, "__dataclass_fields__") else x for x in v]
    if hasattr(v, "__dataclass_fields__"):
        return _plain(v)
    return v


#: the field types copied as they are (the annotations are strings: postponed evaluation)
_SCALARS = {"int", "str", "bool", "float"}
#: each event class's ``to_dict``, made once: one dict display, no loop over the fields
_MAKERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _maker(cls: type) -> Callable[[Any], dict[str, Any]]:
    """``to_dict`` of ``cls`` written out (as dataclasses writes ``__init__``): the same dict
    ``_plain`` makes, at a third of its cost (a trace serialises thousands of events a second)."""
    items = []
    for f in fields(cls):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        value = f"s.{f.name}" if kind in _SCALARS else f"_value(s.{f.name})"
        items.append(f"{f.name!r}: {value}")
    source = f"lambda s: {{'v': V, 'event': N, {', '.join(items)}}}"
    return eval(source, {"_value": _value, "V": VERSION, "N": cls.__name__})  # noqa: S307


def base_name(func: str) -> str:
    """A CUDA function without its version or per-thread-stream suffix (cuMemFreeAsync_ptsz →
    cuMemFreeAsync): what a ``CudaCall`` did, whichever entry point it came through."""
    return func.removesuffix("_ptsz").removesuffix("_v2")


#: each class's ``to_json`` (events) or JSON object (the small dataclasses in them), made once
_JSON_MAKERS: dict[tuple[type, bool], Callable[[Any], str]] = {}


def _json_of(cls: type, event: bool) -> Callable[[Any], str]:
    make = _JSON_MAKERS.get((cls, event))
    if make is None:
        make = _JSON_MAKERS[(cls, event)] = _json_maker(cls, event)
    return make


def _json_maker(cls: type, event: bool) -> Callable[[Any], str]:
    """``to_json`` of ``cls`` written out: the same text as ``json.dumps`` of ``to_dict`` (keys in
    order, compact, not ASCII-escaped), at a fraction of its cost. Each int and str field, list of
    ints or strs, small dataclass and None of an optional field is written directly where its
    value is exactly that (checked per value); any other value goes through the encoder as before.
    One f-string makes the line (a chain of ``+`` copied the growing line once per field: most of
    the cost of a finding's forty). ``event``: with the ``v`` and ``event`` keys, and made safe
    for a terminal (``json_safe``)."""
    text = _text
    parts = [f'"v":{VERSION},"event":{text(cls.__name__)}'] if event else []
    small_of: dict[str, type] = {}
    for f in fields(cls):
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        x = f"s.{f.name}"
        if kind == "int":
            value = f"(str({x}) if {x}.__class__ is int else _other({x}))"
        elif kind == "str":
            value = f"(_text({x}) if {x}.__class__ is str else _other({x}))"
        elif kind == "bool":
            value = f"('true' if {x} is True else 'false' if {x} is False else _other({x}))"
        elif kind in ("list[int]", "list[str]"):
            value = f"_list({x})"
        elif _small(kind.removesuffix(" | None")):
            # a small dataclass of this module (a socket, a call): its own maker, looked up
            name = kind.removesuffix(" | None")
            none = f"'null' if {x} is None else " if kind.endswith(" | None") else ""
            value = (
                f"({none}_json_of({name}, False)({x}) if {x}.__class__ is {name} else _other({x}))"
            )
            small_of[name] = globals()[name]
        elif kind.endswith(" | None"):
            value = f"('null' if {x} is None else _other({x}))"
        else:
            value = f"_other({x})"
        parts.append(f"{text(f.name)}:{{{value}}}")
    # the keys hold no brace, no backslash and no three quotes in a row: the literal text of a
    # triple-quoted f-string as it is; the expressions quote with '
    source = 'lambda s: f"""{{' + ",".join(parts) + '}}"""'
    scope = {"_other": _other, "_text": text, "_list": _list, "_json_of": _json_of, **small_of}
    make = eval(source, scope)  # noqa: S307
    if not event:
        return make
    from vmmtui.stream.names import json_safe

    return lambda s: json_safe(make(s))


def _small(name: str) -> bool:
    """Whether ``name`` is a dataclass of this module (a field's type, as its annotation says)."""
    found = globals().get(name)
    return isinstance(found, type) and hasattr(found, "__dataclass_fields__")


def _list(v: Any) -> str:
    """A list of ints or of strs as JSON (anything else through the encoder)."""
    if v.__class__ is list:
        if len(v) == 1:  # most lists of a trace: one fd, one file
            x = v[0]
            if x.__class__ is int:
                return f"[{x}]"
            if x.__class__ is str:
                return f"[{_text(x)}]"
        if all(x.__class__ is int for x in v):
            return f"[{','.join(map(str, v))}]"
        if all(x.__class__ is str for x in v):
            return f"[{','.join(map(_text, v))}]"
    return _other(v)


def _other(v: Any) -> str:
    """A value of no fast kind: a small dataclass through its own maker, the rest encoded."""
    if hasattr(v.__class__, "__dataclass_fields__"):
        return _json_of(v.__class__, False)(v)
    return _ENCODE(_value(v))


@dataclass(frozen=True)
class TraceEvent(AttachEvent):
    """Events only ``vmmtui trace`` produces (like attach's, about programs vmmtui did not start).

    Their fields are plain (numbers, text, lists, small dataclasses): ``to_dict`` walks them
    directly, the same dict ``codec.encode`` makes at a tenth of its cost (a trace writes
    thousands a second)."""

    def to_dict(self) -> dict[str, Any]:
        make = _MAKERS.get(type(self))
        if make is None:
            make = _MAKERS[type(self)] = _maker(type(self))
        return make(self)

    def to_json(self) -> str:
        return _json_of(type(self), True)(self)


@dataclass(frozen=True)
class TraceStarted(TraceEvent):
    """How the trace runs: ``mode`` is ``ebpf`` or ``polling`` (the fallback, with ``reason``)."""

    mode: str
    targets: list[int]
    command: list[str] = field(default_factory=list)
    everything: bool = False
    #: why polling (no root, no BTF, no libbpf, a refused load): one line with the fix
    reason: str = ""
    #: what is probed: syscall groups and the CUDA functions attached (``cuMemCreate@/path``)
    probes: list[str] = field(default_factory=list)
    #: what could not be probed and why (e.g. "CUDA calls: no libcuda.so.1 found")
    unprobed: list[str] = field(default_factory=list)
    #: the kernel's monotonic clock (ns) when the trace started: ``ktime`` values count from it
    ktime0: int = 0


@dataclass(frozen=True)
class TraceCall(TraceEvent):
    """One call of one thread, as the kernel saw it."""

    pid: int
    tid: int
    ktime: int


@dataclass(frozen=True)
class SocketEnd:
    """A Unix socket as the kernel knows it: its inode, its peer's inode and the bound name
    (``@name`` for an abstract one, ``""`` when unnamed); ``family`` other than ``unix`` is said.
    ``sk`` and ``peer_sk`` name the socket's and its peer's ``struct sock`` (keyed hashes, as
    ``file``): a send's message is queued on its ``peer_sk``, so a receive on that socket is that
    send's (a peer not yet accepted has a sock but no inode; ``""`` where none)."""

    ino: int
    peer_ino: int = 0
    name: str = ""
    family: str = "unix"
    sk: str = ""
    peer_sk: str = ""


@dataclass(frozen=True)
class FdsSent(TraceCall):
    """``sendmsg``/``sendmmsg`` carrying SCM_RIGHTS: the sender's fd numbers and their files.
    ``result`` is the call's return (bytes or messages; ``-errno`` when refused: nothing left)."""

    call: str
    sock: SocketEnd
    fds: list[int]
    files: list[str]
    result: int
    #: the name of each file (``memfd:x``, ``/dev/nvidia-uvm``…), read when the fd was sent
    kinds: list[str] = field(default_factory=list)
    #: fds the message carried that no record held (unreadable, or a record lost): nothing is
    #: known of them, and nothing is claimed
    fds_not_read: int = 0


@dataclass(frozen=True)
class FdsReceived(TraceCall):
    """``recvmsg``/``recvmmsg`` that got SCM_RIGHTS fds: the receiver's new fd numbers and files."""

    call: str
    sock: SocketEnd
    fds: list[int]
    files: list[str]
    result: int
    truncated: bool = False  # MSG_CTRUNC: the kernel closed fds that did not fit
    #: fds the message carried that no record held (see ``FdsSent.fds_not_read``)
    fds_not_read: int = 0


@dataclass(frozen=True)
class PidfdOpened(TraceCall):
    """``pidfd_open(target)``: ``fd`` is the new pidfd, or ``-errno``."""

    target: int
    fd: int


@dataclass(frozen=True)
class FdTaken(TraceCall):
    """``pidfd_getfd(pidfd, target_fd)``: ``fd`` is the caller's copy (``-errno`` when refused).
    ``target`` is the process the pidfd refers to (read in the kernel; 0 when the pidfd was bad)."""

    pidfd: int
    target: int
    target_fd: int
    fd: int
    file: str = ""


@dataclass(frozen=True)
class FdCloseCall(TraceCall):
    """``close(fd)`` (``file`` is what it named before), or ``close_range(fd, last)``; ``call``
    ``exec``: a followed fd the kernel closed at a successful execve (close-on-exec)."""

    fd: int
    file: str
    result: int
    last: int = -1  # close_range's last fd; -1 for close
    call: str = "close"


@dataclass(frozen=True)
class FdDuplicated(TraceCall):
    """``dup``/``dup2``/``dup3``/``fcntl(F_DUPFD*)``: ``fd`` is the new fd (``-errno``)."""

    call: str
    old: int
    fd: int
    file: str


@dataclass(frozen=True)
class MemoryMapped(TraceCall):
    """``mmap`` of an fd that may carry memory: the mapping pins the file's memory until
    ``munmap`` or exit, whether or not the fd stays open (mmap(2): "closing the file descriptor
    does not unmap the region"). ``file`` is the struct file's key as the other records name it,
    ``addr`` the address the kernel returned (``result`` is ``-errno`` when refused, else 0)."""

    fd: int
    file: str
    addr: int
    length: int
    result: int = 0
    prot: int = 0
    flags: int = 0
    offset: int = 0
    #: what the file is (``memfd:x``, ``/dev/shm/x``, ``/dev/nvidia-uvm``…), read at the call
    kind: str = ""


@dataclass(frozen=True)
class FileSized(TraceCall):
    """``ftruncate(fd, size)`` of a file that may carry memory (a memfd, a ``/dev/shm`` file):
    its size from now, what a pin on it holds (ftruncate(2): "the file ... is truncated to a size
    of precisely length bytes"). ``result`` is 0, or ``-errno`` when refused."""

    fd: int
    file: str
    size: int
    result: int = 0


@dataclass(frozen=True)
class MemoryUnmapped(TraceCall):
    """``munmap(addr, length)``, the old range of an ``mremap``, or an ``mmap`` with ``MAP_FIXED``
    that landed on it (``call`` names which): whatever of that range was mapped is no longer
    pinned by this process. Only unmaps that touch a range a ``MemoryMapped`` of this process
    mapped come (the kernel keeps those ranges). For a successful ``mremap`` ``new_addr`` and
    ``new_length`` are where the mapping is now (``new_addr == addr`` when resized in place; 0
    for the other calls and when refused)."""

    addr: int
    length: int
    result: int = 0
    call: str = "munmap"
    new_addr: int = 0
    new_length: int = 0


@dataclass(frozen=True)
class MemfdCreated(TraceCall):
    name: str
    fd: int
    file: str


@dataclass(frozen=True)
class ProcessForked(TraceCall):
    """A traced process made ``child`` (followed from now on)."""

    child: int
    comm: str = ""


@dataclass(frozen=True)
class ProcessExec(TraceCall):
    filename: str
    comm: str = ""


@dataclass(frozen=True)
class ProcessIdentity(TraceEvent):
    """Who ``pid`` is beyond its pid, read from /proc when it forked or ran a program (only where
    there is something to say): its container (``docker 3f2a1b4c5d6e``), its pod's uid and its pid
    in its own PID namespace (``vmmtui.trace.identity``)."""

    pid: int
    container: str = ""
    pod: str = ""
    inner_pid: int | None = None
    ktime: int = 0


@dataclass(frozen=True)
class ProcessExit(TraceCall):
    """The last thread of ``pid`` exited; ``code`` is the exit status as wait() reports it."""

    code: int
    comm: str = ""


@dataclass(frozen=True)
class CudaCall(TraceCall):
    """One CUDA driver call (uprobe + uretprobe on libcuda), with its CUresult.

    ``handle`` is the CUmemGenericAllocationHandle (create, export, import, map, release),
    ``fd`` the POSIX fd exported or imported (-1 when none), ``ptr`` the device address (map,
    unmap, access, alloc, free, IPC), ``ipc`` the 64 IPC handle bytes in hex (legacy IPC, or a
    fabric handle)."""

    func: str
    result: int
    size: int = 0
    device: int = -1
    handle_types: int = 0
    handle: int = 0
    fd: int = -1
    ptr: int = 0
    flags: int = 0
    ipc: str = ""
    duration_ns: int = 0
    #: the open file the exported or imported fd names (read in the kernel at the call)
    file: str = ""


@dataclass(frozen=True)
class QueuedAtRelease(TraceCall):
    """SCM_RIGHTS fds freed by the kernel still queued on a Unix socket: the socket holding the
    message was released (closed, its process exited) or collected with it unreceived. The
    kernel's own statement that these files were sent and never received. ``socket_file`` is the
    sending socket's inode (``SocketEnd.ino`` of the send; 0 when it is already gone), ``files``
    the files as the send named them, ``count`` the fds the message carried. ``sender`` is the
    sending socket's ``SocketEnd.sk``."""

    socket_file: int
    files: tuple[str, ...]
    count: int
    sender: str = ""


@dataclass(frozen=True)
class FdsDropped(TraceCall):
    """A receive without room for SCM_RIGHTS (``read``, ``readv``, ``recvfrom``, ``recvmsg``
    without a control buffer) took a message's data: the kernel closed the fds it carried, so
    they were never received. ``sock`` is the receiving socket (its ``ino`` and ``sk``),
    ``files`` the files as the send named them, ``count`` the fds the message carried."""

    call: str
    sock: SocketEnd
    files: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class TraceLost(TraceEvent):
    """Records the kernel could not hand over (ring buffer full): said, never hidden. One per CPU
    and window: ``count`` records lost on ``cpu`` between ``t_first_ns`` and ``t_last_ns`` (the
    kernel's clock, as ``ktime``; ``cpu`` -1 and times 0 when not known)."""

    count: int
    ktime: int = 0
    cpu: int = -1
    t_first_ns: int = 0
    t_last_ns: int = 0


@dataclass(frozen=True)
class TraceFinished(TraceEvent):
    """The end of a trace: how the command ended, what was counted and found."""

    command: list[str]
    returncode: int | None
    signal: str | None
    events: int
    lost: int
    seconds: float
    #: every finding (shares included; ``TraceSession.count``): the one count every renderer says
    findings: int = 0
    #: ``ebpf``: ``events`` counts the calls seen; ``polling``: the events the polls gave
    mode: str = "ebpf"
    #: of the findings, the ones to look at (not a share, an import or a quiet fact)
    problems: int = 0
    #: of the findings, the quiet facts (``model.findings.QUIET``: a received socket or pipe
    #: held until exit), and how many by the kind of file
    quiet: int = 0
    quiet_by: dict[str, int] = field(default_factory=dict)
    #: eBPF: the calls of the traced processes the kernel looked at and recorded nothing of, by
    #: kind (``trace.loader.UNRECORDED``: a close or dup of a file not followed, an anonymous
    #: mmap, an unmap touching no mapping kept, a message without control data)
    unrecorded: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RefusalCheck:
    """One rule of a refusal, checked on the facts read at its moment (``ok`` False: this is a
    cause). ``finding``: the words an older vmmtui recorded with it; this one words the check
    from the refusal's facts where it is drawn (``words/refusals.py``) and leaves it ""."""

    name: str
    ok: bool | None
    finding: str = ""


class RefusalReason(StrEnum):
    """Why a call was refused, as a code (``CallRefused.reason``): ``words/refusals.py`` words
    each, with its fix, from the refusal's facts."""

    ERRNO = "errno"  # nothing more is known than the errno
    NO_SUCH_PROCESS = "no-such-process"  # pidfd_open ESRCH: not in the caller's PID namespace
    FD_NOT_OPEN = "fd-not-open"  # pidfd_getfd EBADF: the exporter's fd (target_fd) was closed
    EXPORTER_GONE = "exporter-gone"  # pidfd_getfd ESRCH: the exporter exited first
    PTRACE_UNREAD = "ptrace-unread"  # pidfd_getfd EPERM, neither the kernel nor /proc had facts
    PTRACE = "ptrace"  # pidfd_getfd EPERM: the ptrace rules on caller's and exporter's facts


@dataclass(frozen=True)
class ProcessFacts:
    """One side of a refused pidfd_getfd as the ptrace check sees it: read by the kernel at the
    call (``source`` "kernel": the processes may be gone a moment later), or from /proc when the
    decoder got no kernel record ("/proc", read later: said so). ``role``: "importer" (the caller,
    taking the fd) or "exporter" (whose fd it asked for). -1: not known."""

    pid: int
    role: str
    comm: str
    uid: int
    euid: int
    suid: int
    gid: int
    egid: int
    sgid: int
    cap_eff: int
    cap_prm: int
    userns: int
    pidns: int
    seccomp: int
    filters: int
    dumpable: int
    source: str = "kernel"


@dataclass(frozen=True)
class CallRefused(TraceEvent):
    """A refused call with the facts that decided it (its cause and fix are worded from them): for pidfd_getfd both
    processes' facts as the kernel read them at the call (``caller``, ``exporter``), Yama's
    ptrace_scope (``yama``: "0".."3", "not loaded", "" not read), and the checks made of them."""

    pid: int
    call: str
    errno: str
    target: int
    #: the cause and fix an older vmmtui recorded in its words; this one leaves them "" and
    #: words the refusal from ``reason`` and the facts where it is drawn (``words/refusals.py``)
    cause: str = ""
    fix: str = ""
    ktime: int = 0
    checks: list[RefusalCheck] = field(default_factory=list)
    caller: ProcessFacts | None = None
    exporter: ProcessFacts | None = None
    yama: str = ""
    #: a ``RefusalReason`` ("" in an older recording, which carries its words)
    reason: str = ""
    #: the exporter's fd that pidfd_getfd asked for (-1: not that call)
    target_fd: int = -1
    #: under Yama's ptrace_scope 1: whether the caller was the exporter's ancestor at the call
    ancestor: bool | None = None


@dataclass(frozen=True)
class CapabilityProbe(TraceEvent):
    """A call that failed by design: the program asked whether ``capability`` works here and
    learnt ``found`` (``vmmtui.model.probes``: what counts as one). No problem, no fix; ``result``
    is the call's CUresult."""

    pid: int
    call: str
    capability: str
    found: str
    result: int
    ktime: int = 0


@dataclass(frozen=True)
class LedgerFinding(TraceEvent):
    """What the ledger concluded, as facts: ``kind`` is a ``model.findings.FindingKind``
    (``shared``, ``imported``, ``refused``, ``in-flight``, ``fd-never-closed``…, or ``unknown``: a
    conclusion records lost could overturn, ``lost`` of them between ``lost_first_ns`` and
    ``lost_last_ns``, the kernel's clock; 0, 0 when the window is not known), ``pid`` the process
    it is about. No words: ``words.findings.finding_words`` makes them where it is drawn (a
    recording's JSON carries them too, made from the same function when it is written)."""

    kind: str
    pid: int
    ktime: int = 0
    #: the other process of a share (sender, exporter); 0 when none
    peer: int = 0
    file: str = ""
    lost: int = 0
    lost_first_ns: int = 0
    lost_last_ns: int = 0
    #: what matched the two sides of a share or an import (``model.findings.Proof``): ``struct
    #: file``, ``kcmp``, ``handle bytes``, ``export data``; "" where nothing was matched
    proof: str = ""
    #: the road a share or an import took (``model.roads.Road``: ``scm-rights``, ``pidfd-getfd``,
    #: ``legacy-ipc``, ``pool-export-data``, ``fabric``, ``kcmp``) and the handle type at each end
    #: (``model.roads.HandleType``); "" where not known
    road: str = ""
    exported_as: str = ""
    imported_as: str = ""
    #: the fd of ``pid`` it is about, and the fd of ``peer`` that is the same open file
    fd: int = -1
    peer_fd: int = -1
    #: ``pid``'s CUDA handle or pool, and the exporter's (``peer``)
    handle: int = 0
    peer_handle: int = 0
    #: ``pid``'s device pointer (an IPC mapping, a pool pointer), and the exporter's
    ptr: int = 0
    peer_ptr: int = 0
    #: the allocation's size in bytes; 0 when not seen
    size: int = 0
    #: what the memory is (``model.findings.Memory``): allocation, ipc, pool, pool pointer, file
    memory: str = ""
    #: how ``pid`` got the fd (``created``, ``received``, ``taken``, ``present``, ``inherited``)
    #: or the pool (``created``, ``imported``); for ``in-flight``, how ``peer`` released the
    #: socket (``exit``, ``close``)
    how: str = ""
    #: the call it came by (``SCM_RIGHTS``, ``pidfd_getfd``, ``fork``, ``kcmp``…), or the call
    #: that dropped it (``read``), with the socket or the pidfd it came through
    via: str = ""
    sock: SocketEnd | None = None
    pidfd: int = -1
    #: the wait status of the process whose exit it was found at (``peer``'s, for an exporter's
    #: death); -1 when none
    status: int = -1
    #: nanoseconds from the send to its receive (negative: the send's record ended after it)
    gap_ns: int = 0
    #: the open file: its kind (``memfd``, ``gpu``), or its name (``memfd:x``, a path)
    name: str = ""
    #: the fds of an ``unknown`` list of sends
    fds: list[int] = field(default_factory=list)
    #: for ``unknown``: the kind it would be without the records lost ("" for sends unseen)
    was: str = ""
    #: the refused call, as the tracer decided it (pidfd_getfd) or as the driver answered it
    refusal: CallRefused | None = None
    cuda: CudaCall | None = None
    #: the refcount book's: the 64 bytes that named it (hex), the importer's opens outstanding
    #: and its closes so far, when what it follows happened (the export, the first release, the
    #: mapping), and the CUresult the driver refused the call with (0: it did not refuse)
    ipc: str = ""
    opens: list[int] = field(default_factory=list)
    closes: int = 0
    since: int = 0
    result: int = 0
    #: for a copy inherited by fork (``how`` ``inherited``): the process that received or took
    #: it from ``peer``, and forked ``pid`` (or an ancestor of it) while holding it; 0 when the
    #: file came to ``pid`` itself
    through: int = 0

    @classmethod
    def of(cls, kind: str, pid: int, ktime: int = 0, **facts: Any) -> LedgerFinding:
        """``LedgerFinding(kind, pid, ktime, **facts)`` at a fifth of its cost: the fields set
        as ``__init__`` sets them (the defaults, a new list for each list, then the facts), not
        one frozen ``__setattr__`` each (the ledger makes one for every share of a trace). A
        name that is not a field is refused, as ``__init__`` refuses it."""
        if not _FINDING_FIELDS.issuperset(facts):
            raise TypeError(f"not fields of a finding: {sorted(set(facts) - _FINDING_FIELDS)}")
        new = object.__new__(cls)
        d = new.__dict__
        d.update(_FINDING_DEFAULTS, kind=kind, pid=pid, ktime=ktime)
        for name, make in _FINDING_FACTORIES:
            d[name] = make()
        d.update(facts)
        return new

    def but(self, **changes: Any) -> LedgerFinding:
        """``dataclasses.replace(self, **changes)`` at a fifth of its cost, as ``of``: the fields
        copied as they are (a list is shared, as ``replace`` shares it), then the changes."""
        if not _FINDING_FIELDS.issuperset(changes):
            raise TypeError(f"not fields of a finding: {sorted(set(changes) - _FINDING_FIELDS)}")
        new = object.__new__(self.__class__)
        new.__dict__.update(self.__dict__, **changes)
        return new


#: what ``LedgerFinding.of`` starts from: every field's default, and the fields whose default is
#: made anew for each finding (the lists)
_FINDING_DEFAULTS = {f.name: f.default for f in fields(LedgerFinding) if f.default is not MISSING}
_FINDING_FACTORIES = [
    (f.name, f.default_factory) for f in fields(LedgerFinding) if f.default_factory is not MISSING
]
_FINDING_FIELDS = frozenset(f.name for f in fields(LedgerFinding))


@dataclass(frozen=True)
class PinnedBytes(TraceEvent):
    """The bytes ``pid``'s exported memory pins now (its handle or an importer's keeps it alive),
    made by the ledger's refcount book whenever the number changes: one buffer more per step is a
    leak seen at step 2."""

    pid: int
    ktime: int
    bytes: int
    buffers: int


@dataclass(frozen=True)
class TraceClock(TraceEvent):
    """The kernel's clock while nothing else happens (once a second, eBPF): what waits on time
    (an export no one imported) is decided live in a quiet run."""

    ktime: int
