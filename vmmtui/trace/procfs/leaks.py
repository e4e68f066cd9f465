"""Leaks and zombies: memory kept by a process after the processes it shared with are gone, and
files in /dev/shm or socket files whose owners are dead.

Checked after every scan (``during``), when a process exits (``at_exit``) and on demand
(``leftover_files``). Where /proc cannot tell (a GPU fd's mapping is invisible), the wording says so.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass, field

from vmmtui.stream.events import FdOpened, GpuMemory, Leak, LeakKind
from vmmtui.stream.names import shown
from vmmtui.trace.procfs.lifecycle import Tracker
from vmmtui.trace.procfs.scan import MEMORY_KINDS

#: why a shared fd's origin is not known, by FdOpened.how
ORIGIN_UNSEEN = {
    "present": "it was found at attach, so which process made it and which received it was not seen",
    "unknown": "it appeared in both processes within one poll, so which made it was not seen",
}
TORCH_SHM = re.compile(r"^torch_(\d+)_")
SOCKET_DIRS = ("/tmp",)


@dataclass
class Followed:
    """What the followed processes were seen with, for the files left at the end: their pids
    and the (dev, ino) of every /dev/shm file one of them held or mapped at a poll."""

    pids: set[int] = field(default_factory=set)
    files: set[tuple[int, int]] = field(default_factory=set)
    #: /dev/shm files made during the run that no followed process was seen to hold
    strangers: list[str] = field(default_factory=list)


@dataclass
class LeakFinder:
    said: set[tuple] = field(default_factory=set)

    def _once(self, key: tuple, leak: Leak) -> list[Leak]:
        if key in self.said:
            return []
        self.said.add(key)
        return [leak]

    def during(self, t: Tracker, gpu: dict[int, GpuMemory] | None, at: float) -> list[Leak]:
        """fds and NVML memory held by a live process whose peers are all gone."""
        out: list[Leak] = []
        live = _with_live_peer(t)
        for (pid, fd), e in list(t.received.items()):  # only fds that came from another process
            if (
                pid in live
                or e.kind not in MEMORY_KINDS
                or pid not in t.alive
                or e.how not in ("arrived", "inherited")
            ):
                continue  # a process's own allocation is not leaked by its peers' exit
            peers = t.peers.get(pid, set()) | ({e.source.pid} if e.source else set())
            if not peers or not peers <= t.gone:
                continue
            p = t.alive[pid]
            f = p.fds.get(fd)
            if f is not None and any((m.dev, m.ino) == f.key for m in p.maps):
                continue  # still mapped: in use, not leaked
            names = ", ".join(f"{shown(t.names.get(q, '?'))} ({q})" for q in sorted(peers))
            seen = (
                "not mapped any more (/proc/PID/maps)"
                if e.kind != "gpu"
                else "whether it is still mapped cannot be seen from /proc for GPU memory"
            )
            out += self._once(
                ("fd", pid, fd, e.target),
                Leak(
                    LeakKind.POSSIBLE_FD_AFTER_PEER,
                    f"{shown(t.names.get(pid, '?'))} ({pid}) fd {fd} → {shown(e.target)}",
                    pid,
                    f"still open at this poll after every process it shared with exited ({names}); "
                    f"{seen}; a close between two polls is not seen",
                    "",
                    at,
                    memory=e.kind,
                    peer=e.source.pid if e.source else None,
                    size=f.size if f is not None else 0,
                ),
            )
        out += self._possible(t, at)
        for pid, g in (gpu or {}).items():
            peers = {
                e.source.pid
                for e in t.timeline.get(pid, [])
                if isinstance(e, FdOpened)
                and e.kind == "gpu"
                and e.how == "arrived"
                and e.source is not None
            }
            if pid in t.alive and g.used and peers and peers <= t.gone:
                total = sum(g.used.values())
                out += self._once(
                    ("gpu", pid),
                    Leak(
                        LeakKind.GPU_MEMORY_AFTER_PEER,
                        f"{shown(t.names.get(pid, '?'))} ({pid}) GPU memory {total >> 20} MiB",
                        pid,
                        "this process imported GPU memory from processes that have all exited, and NVML still charges "
                        "it memory; an import keeps the exporter's allocation alive after the exporter died, and "
                        "NVML may show it under no process at all",
                        "release (cuMemRelease / cuIpcCloseMemHandle) what a peer imported when it dies; "
                        "watch for PEER_CLOSED on the connection",
                        at,
                    ),
                )
        return out

    def _possible(self, t: Tracker, at: float) -> list[Leak]:
        """The same check for shared fds whose origin polling did not see (open before attach, or
        made and sent within one poll): said as possible leaks, since the holder may have made it."""
        out: list[Leak] = []
        live = _with_live_peer(t)
        for (pid, fd), e in list(t.unsure.items()):
            if pid in live or e.kind not in MEMORY_KINDS or e.kind == "gpu" or pid not in t.alive:
                continue
            peers = t.peers.get(pid, set()) | ({e.source.pid} if e.source else set())
            if not peers or not peers <= t.gone:
                continue
            p = t.alive[pid]
            f = p.fds.get(fd)
            if f is not None and any((m.dev, m.ino) == f.key for m in p.maps):
                continue
            names = ", ".join(f"{shown(t.names.get(q, '?'))} ({q})" for q in sorted(peers))
            out += self._once(
                ("possible", pid, fd, e.target),
                Leak(
                    LeakKind.POSSIBLE_FD_AFTER_PEER,
                    f"{shown(t.names.get(pid, '?'))} ({pid}) fd {fd} → {shown(e.target)}",
                    pid,
                    f"still open, not mapped any more (/proc/PID/maps), after every process it was "
                    f"shared with exited ({names}); {ORIGIN_UNSEEN[e.how]}: a leak if it was received",
                    "",
                    at,
                    memory=e.kind,
                ),
            )
        return out

    def at_exit(self, t: Tracker, pid: int, at: float) -> list[Leak]:
        """Received fds a process never closed: the exit closed them."""
        out: list[Leak] = []
        for e in t.at_exit.get(pid, []):
            if ("possible", pid, e.fd, e.target) in self.said:
                out += self._once(
                    ("possible-exit", pid, e.fd, e.target),
                    Leak(
                        LeakKind.POSSIBLE_HELD_UNTIL_EXIT,
                        f"{shown(t.names.get(pid, '?'))} ({pid}) fd {e.fd} → {shown(e.target)}",
                        pid,
                        "kept after every process it was shared with exited, and still open at the "
                        f"last scan before this one exited; {ORIGIN_UNSEEN[e.how]}",
                        "",
                        at,
                        memory=e.kind,
                    ),
                )
            if (
                e.how == "opened"
                and e.kind in MEMORY_KINDS
                and e.kind != "gpu"
                and (pid, e.fd) not in t.sources  # polling saw it go from here: the origin's own
            ):
                # polling sees an fd appear, not the call that put it there: a memfd or a
                # /dev/shm file that arrived after the trace began and was still open at the end
                # may have been received (its sender closed its own copy between two polls, so
                # kcmp had nothing to match) -- said as possible, never cleared as fine
                out += self._once(
                    ("possible-exit", pid, e.fd, e.target),
                    Leak(
                        LeakKind.POSSIBLE_HELD_UNTIL_EXIT,
                        f"{shown(t.names.get(pid, '?'))} ({pid}) fd {e.fd} → {shown(e.target)}",
                        pid,
                        f"appeared at {e.at:.2f} s, no longer mapped, and still open at the last "
                        "scan before the process exited: only its exit closed it. Polling cannot "
                        "tell whether this process made it or received it (it sees no sendmsg or "
                        "recvmsg, and no other process held it at a poll); received, it is a leak "
                        "(trace as root, with eBPF, to know)",
                        "",
                        at,
                        memory=e.kind,
                    ),
                )
            if e.how == "arrived" and e.kind in MEMORY_KINDS:
                src = (
                    f"from {shown(t.names.get(e.source.pid, '?'))} ({e.source.pid})"
                    if e.source
                    else ""
                )
                out += self._once(
                    ("possible-exit", pid, e.fd, e.target),
                    Leak(
                        LeakKind.POSSIBLE_HELD_UNTIL_EXIT,
                        f"{shown(t.names.get(pid, '?'))} ({pid}) fd {e.fd} → {shown(e.target)}",
                        pid,
                        f"received {src} at {e.at:.2f} s, not mapped, and still open when the "
                        "process was last read before a poll found it gone: its exit closed it, "
                        "unless a close came after that read (polling does not see the close)",
                        "",
                        at,
                        memory=e.kind,
                        peer=e.source.pid if e.source else None,
                    ),
                )
        return out


def _with_live_peer(t: Tracker) -> set[int]:
    """Processes one of whose peers still runs: none of their fds is kept after every peer exited
    (checked once a process, not once an fd)."""
    return {pid for pid in t.alive if t.peers.get(pid, set()) - t.gone}


def _owner_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def leftover_files(
    created_after: float | None = None,
    bound_paths: set[str] | None = None,
    live_paths: set[str] | None = None,
    at: float = 0.0,
    seen: Followed | None = None,
) -> list[Leak]:
    """/dev/shm files of dead owners (torch_<pid>_*, or created during a watch and held by no one)
    and socket files no live socket is bound to.

    ``seen``: what the followed processes were seen to hold (a watch, a trace of pids): a file is
    theirs only when a poll saw one of them hold or map it, and a ``torch_<pid>_`` file only
    when its pid was one of them. /dev/shm is the whole machine's: a file another program made
    meanwhile is not the followed command's finding (shm_overview(7): any process may
    shm_open a name), so it is counted in ``seen.strangers`` and said as such, never a leak."""
    out: list[Leak] = []
    try:
        shm = os.scandir("/dev/shm")
    except OSError:
        shm = None
    held = _held_shm() if shm is not None else set()
    for entry in shm or []:
        m = TORCH_SHM.match(entry.name)
        try:
            st = entry.stat()
        except OSError:
            continue
        if m and not _owner_alive(int(m.group(1))):
            if seen is not None and int(m.group(1)) not in seen.pids:
                continue  # a dead process's file, never one of those followed
            out.append(
                Leak(
                    LeakKind.SHM_FILE,
                    shown(entry.path),
                    int(m.group(1)),
                    f"PyTorch's refcount file of process {m.group(1)}, which is dead",
                    f"rm {shown(entry.path)} (PyTorch's file_descriptor sharing strategy cleans it when "
                    "its processes exit normally)",
                    at,
                )
            )
        elif (
            created_after is not None
            and st.st_mtime >= created_after
            and (st.st_dev, st.st_ino) not in held
        ):
            if seen is not None and (st.st_dev, st.st_ino) not in seen.files:
                seen.strangers.append(entry.path)  # made meanwhile, never seen held by them
                continue
            out.append(
                Leak(
                    LeakKind.SHM_FILE,
                    shown(entry.path),
                    None,
                    "created while watched, left after every process exited "
                    "and held or mapped by no process",
                    f"shm_unlink the name when done (rm {shown(entry.path)})",
                    at,
                )
            )
    live = live_paths or set()
    candidates = set(bound_paths or ())
    for d in SOCKET_DIRS:
        with contextlib.suppress(OSError):
            candidates |= {
                e.path
                for e in os.scandir(d)
                if e.name.startswith(("nccl-socket", "nvshmem-socket"))
            }
    for path in sorted(candidates):
        try:
            is_sock = stat.S_ISSOCK(os.lstat(path).st_mode)
        except OSError:
            continue
        if is_sock and path not in live:
            out.append(
                Leak(
                    LeakKind.SOCKET_FILE,
                    shown(path),
                    None,
                    "a socket file no live socket is bound to: its owner died "
                    "or closed without unlinking it",
                    f"unlink it (rm {shown(path)}); bind after unlinking stale "
                    "paths, or use abstract names",
                    at,
                )
            )
    return out


def _held_shm() -> set[tuple[int, int]]:
    """(dev, ino) of every /dev/shm file some readable process has open or mapped."""
    from vmmtui.trace.procfs.scan import all_pids, scan_process

    held: set[tuple[int, int]] = set()
    for pid in all_pids():
        p = scan_process(pid)
        held |= {f.key for f in p.fds.values() if f.kind == "shm"} | {
            (m.dev, m.ino) for m in p.maps if m.kind == "shm"
        }
    return held
