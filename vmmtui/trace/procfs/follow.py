"""Following a set of processes (fixed pids, or a whole process tree) scan after scan.

One ``poll()`` is one /proc scan plus NVML, turned into events: what changed (lifecycle), what is
shared (shares), what leaked (leaks), and, once each, what cannot be seen from outside.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from vmmtui.stream.events import (
    Event,
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    NoticeCode,
    ProcessGone,
)
from vmmtui.stream.names import shown
from vmmtui.trace.procfs.leaks import Followed, LeakFinder
from vmmtui.trace.procfs.lifecycle import Tracker
from vmmtui.trace.procfs.mappings import Mappings
from vmmtui.trace.procfs.nvml import Nvml
from vmmtui.trace.procfs.scan import REFRESH_POLLS, Scan, children, scan

#: what /proc, kcmp and NVML cannot show, said once when it applies
UNSEEN = {
    "gpu-fd": "an exported VMM fd reads /dev/nvidiactl like the driver's own fds: only kcmp tells which one is "
    "shared; an importer that closed its fd after import (NCCL, PyTorch expandable segments) keeps no "
    "fd, so its import is invisible here",
    "legacy": "legacy CUDA IPC handles (cudaIpcGetMemHandle, PyTorch's default CUDA tensor sharing) travel as 64 "
    "plain bytes: no fd moves, and kcmp has nothing to compare",
    "nvml": "NVML (like nvidia-smi) charges shared memory to one process: to its creator while the creator "
    "lives (an importer's share shows under the exporter), to an importer once the creator is gone; the "
    "GPU table says who holds what",
    "pidns": "these processes are in different PID namespaces: a pid sent from one names another process or none "
    "in the other (pidfd_open fails with ESRCH); fds still travel over Unix sockets",
}


def _own_pid_ns() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


OWN_PID_NS = _own_pid_ns()


def _other_namespace(pid: int) -> str:
    """pid ``pid`` is in another PID namespace than vmmtui: said with the pid it has there."""
    inner = ""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    inner = line.split()[-1]
    except OSError:
        pass
    there = f" (it is pid {inner} there)" if inner and inner != str(pid) else ""
    return (
        f"pid {pid} is in another PID namespace than vmmtui{there}: pids it sends, prints or "
        "passes to pidfd_open name other processes, or none, here"
    )


@dataclass
class Follower:
    targets: set[int]
    tree: bool = False
    use_nvml: bool = True
    refresh_polls: int = (
        REFRESH_POLLS  # every process read in full at least once per this many polls
    )
    t0: float = field(default_factory=time.monotonic)
    tracker: Tracker = field(default_factory=Tracker)
    leaks: LeakFinder = field(default_factory=LeakFinder)
    nvml: Nvml | None = None
    #: NVML being opened in a thread (``Nvml.opening()``), taken at the first poll that needs it
    nvml_soon: Future[Nvml] | None = None
    #: the last NVML reading said (``NvmlSample``): a reading is said only when it differs
    gpu_last: tuple = ()
    said: set[str] = field(default_factory=set)
    unseen: list[str] = field(default_factory=list)
    last: Scan | None = None
    bound_paths: set[str] = field(default_factory=set)
    all_leaks: list = field(default_factory=list)
    shared_history: list = field(default_factory=list)  # every SharedFile said, oldest first
    gpu_holders: dict[int, bool] = field(default_factory=dict)  # pid -> holds a /dev/nvidia* fd
    #: pid -> the fd table (the scan's dict) last looked at: a scan hands the same dict back when
    #: the table is unchanged, so only changed tables are gone through
    tables: dict[int, dict] = field(default_factory=dict)
    #: the seconds between polls the caller aims at (what "shorter than a poll" means)
    interval: float = 0.25
    polls: int = 0
    #: the longest time between the starts of two polls: what lived shorter may have been missed
    longest_gap: float = 0.0
    last_start: float | None = None
    #: CPU seconds (this thread's) a poll may spend reading processes; the rest wait for the next
    #: poll, stalest first, so that the rate holds (None: read every process that ran, every poll)
    budget: float | None = 0.040
    deferred: int = 0  # process readings put off to a later poll, in all
    stalest: float = 0.0  # the oldest reading a poll kept for a process that had run (s)
    #: pids that exited before any poll saw them (watch knows them from waitpid), with how they ended
    never_seen: dict[int, str] = field(default_factory=dict)
    #: what the followed processes were seen with (which /dev/shm files are theirs at the end)
    followed: Followed = field(default_factory=Followed)
    #: what each process maps, and the claims made from it (``procfs/mappings.py``)
    mappings: Mappings = field(default_factory=Mappings)
    #: False for a command started here (nothing of its is "found at attach": ``Tracker.attached``)
    attached: bool = True

    def __post_init__(self) -> None:
        self.tracker.attached = self.attached
        # NVML opened at once where there is a driver (or VMMTUI_NVML names a library): the
        # GPU ledger wants its reading of every GPU, whether or not a followed process holds a
        # /dev/nvidia* fd yet
        if self.use_nvml and self.nvml is None and self.nvml_soon is None:
            self.nvml_soon = Nvml.opening()

    def poll(self) -> list[Event]:
        start = time.monotonic()
        # from the start (a watched command runs from then) or the last poll to this one
        self.longest_gap = max(self.longest_gap, start - (self.last_start or self.t0))
        self.last_start = start
        self.polls += 1
        if self.tree:
            for pid in list(self.targets):
                if pid not in self.tracker.gone:
                    found = children(pid)
                    self.tracker.discovered.update(found)
                    self.targets.update(found)
        s = scan(self.targets, self.t0, self.last, self.refresh_polls, self.budget)
        self.last = s
        now = time.clock_gettime(time.CLOCK_BOOTTIME)
        for p in s.processes.values():
            if p.deferred:
                self.deferred += 1
                self.stalest = max(self.stalest, now - p.read_end)
        gpu = None
        alive = s.alive()
        changed = [p for pid, p in alive.items() if self.tables.get(pid) is not p.fds]
        for p in changed:
            self.gpu_holders[p.pid] = any(f.kind == "gpu" for f in p.fds.values())
        holders = [pid for pid in alive if self.gpu_holders.get(pid)]
        if holders and self.use_nvml:
            if self.nvml is None:
                soon, self.nvml_soon = self.nvml_soon, None
                self.nvml = soon.result() if soon is not None else Nvml.open()
            gpu = self.nvml.usage(holders, s.at)
        self.followed.pids.update(alive)
        for p in alive.values():
            self.followed.files.update(m.key for m in p.maps if m.kind == "shm")
        for p in changed:
            self.followed.files.update(f.key for f in p.fds.values() if f.kind == "shm")
        shares_before, scan_before = self.tracker.shares, self.tracker.prev
        events = self.tracker.update(s, gpu)
        events += self.mappings.update(s, self.tracker, shares_before, scan_before, events)
        if self.use_nvml and (self.nvml is not None or self.nvml_soon is not None):
            events += self._reading(s.at)
        for e in list(events):
            if isinstance(e, ProcessGone):
                events += self.leaks.at_exit(self.tracker, e.pid, s.at)
        events += self.leaks.during(self.tracker, gpu, s.at)
        self.all_leaks += [e for e in events if type(e).__name__ == "Leak"]
        self.shared_history += [e for e in events if type(e).__name__ == "SharedFile"]
        for p in changed:  # an fd table seen before: its sockets were looked at then
            self.tables[p.pid] = p.fds
            for f in p.fds.values():
                sock = s.sockets.sockets.get(f.ino) if f.kind == "socket" else None
                if sock and sock.path and not sock.path.startswith("@"):
                    self.bound_paths.add(sock.path)
        for pid in [pid for pid in self.tables if pid not in alive]:
            del self.tables[pid]
        events += self._notes(s, holders)
        if self.tree:
            self.targets -= self.tracker.gone
        return events

    def strangers(self) -> list[Event]:
        """The /dev/shm files made during the run that no followed process was seen to hold:
        said once, counted, never theirs."""
        names = self.followed.strangers
        if not names or "strangers" in self.said:
            return []
        self.said.add("strangers")
        listed = ", ".join(shown(n) for n in names[:3]) + (
            f" +{len(names) - 3}" if len(names) > 3 else ""
        )
        facts: dict[str, str | int] = {"count": len(names), "names": listed}
        return [Notice(code=NoticeCode.SHM_STRANGERS, facts=facts)]

    def _reading(self, at: float) -> list[Event]:
        """NVML's reading of every GPU (the GPU ledger's charges), where it changed since the last."""
        if self.nvml is None and self.nvml_soon is not None:
            self.nvml, self.nvml_soon = self.nvml_soon.result(), None
        assert self.nvml is not None
        reading = self.nvml.sample(at)
        key = (reading.error, [(g.index, g.charges, g.error) for g in reading.gpus])
        if key == self.gpu_last:
            return []
        self.gpu_last = key
        return [reading]

    def _say(self, key: str, text: str) -> list[Event]:
        if key in self.said:
            return []
        self.said.add(key)
        self.unseen.append(text)
        return [Notice(text)]

    def missed(self) -> list[Event]:
        """What polling may have missed, with the figures of this run: said at the end."""
        out: list[Event] = []
        for pid in self.tracker.vanished - set(self.never_seen):
            self.never_seen[pid] = "unknown"  # how it ended: not ours to reap
        if self.never_seen:
            pids = sorted(self.never_seen)
            listed = ", ".join(f"{p} ({self.never_seen[p]})" for p in pids[:10])
            more = f" and {len(pids) - 10} more" if len(pids) > 10 else ""
            out += self._say(
                "never-seen",
                f"{len(pids)} process(es) exited before any poll saw them: {listed}{more}; what they "
                "held or shared is not known",
            )
        if self.deferred and self.budget is not None:  # only a budget puts readings off
            out += self._say(
                "deferred",
                f"a poll reads the processes that ran within {self.budget * 1e3:.0f} ms of CPU, "
                f"stalest first, and keeps the last reading of the rest ({self.deferred} readings "
                f"put off): under this load a process that ran was read at most "
                f"{self.stalest * 1e3:.0f} ms apart, so what it did for less than that may have "
                "been missed",
            )
        if self.polls > 1:
            out += self._say(
                "gaps",
                f"{self.polls} polls, at most {self.longest_gap * 1e3:.0f} ms apart: an fd or a share "
                "that lasted less than that may have been missed",
            )
        return out

    def _notes(self, s: Scan, gpu_holders: list[int]) -> list[Event]:
        out: list[Event] = []
        out += (
            []
            if self.polls < 2
            else self._say(
                "polling",
                f"polling /proc every {self.interval:g} s sees what is there at each poll: an fd opened "
                "and closed, a share made and undone, or a process that came and went between two "
                "polls leaves no trace here",
            )
        )
        if gpu_holders:
            out += self._say("gpu-fd", UNSEEN["gpu-fd"]) + self._say("legacy", UNSEEN["legacy"])
            if self.nvml is not None and self.nvml.error:
                out += self._say("nvml-missing", self.nvml.error)
            elif self.nvml is not None:
                out += self._say("nvml", UNSEEN["nvml"])
        if s.sockets.source != "sock_diag":
            out += self._say("sockets", s.sockets.source)
        if self.tracker.shares and self.tracker.shares.unavailable:
            out += self._say(
                "kcmp",
                f"kcmp(KCMP_FILE) {self.tracker.shares.unavailable}: shared open files "
                "cannot be proven here (same inode only)",
            )
        if len({p.pid_ns for p in s.alive().values() if p.pid_ns}) > 1:
            out += self._say("pidns", UNSEEN["pidns"])
        for p in s.alive().values():
            if p.pid_ns and p.pid_ns != OWN_PID_NS and f"ns-{p.pid}" not in self.said:
                out += self._say(f"ns-{p.pid}", _other_namespace(p.pid))
        for p in s.alive().values():
            if p.maps_error:
                out += self._say(
                    f"maps-{p.pid}", f"pid {p.pid}: shared-memory mappings unknown ({p.maps_error})"
                )
        return out

    def snapshots(self) -> list[Event]:
        """The fd tables and kcmp verdicts of the last scan, as the session's own events (for --once/--json)."""
        if self.last is None:
            return []
        out: list[Event] = []
        shares = self.tracker.shares
        for pid, p in self.last.processes.items():
            if p.error:
                continue
            rows = []
            for fd, f in sorted(p.fds.items()):
                opened = self.tracker.open_fds.get((pid, fd))
                note = ""
                if shares and shares.same_as(pid, fd):
                    note = "≡ " + ", ".join(f"{q} fd {qfd}" for q, qfd in shares.same_as(pid, fd))
                elif f.pidfd_of:
                    note = f"pidfd of {f.pidfd_of}"
                rows.append(FdRow(fd, f.target, f.kind, note, None, opened.how if opened else ""))
            out.append(FdSnapshot(p.name, pid, "alive", rows))
        for shared in shares.files if shares else []:
            if shared.same_description and len(shared.holders) >= 2:
                a = shared.holders[0]
                for b in shared.holders[1:]:
                    if b.pid != a.pid:
                        out.append(
                            KcmpVerdict(
                                a.pid,
                                a.fd,
                                b.pid,
                                b.fd,
                                True,
                                "one open file description",
                                self.tracker.names.get(b.pid, "process"),
                            )
                        )
        return out

    def close(self) -> None:
        if self.nvml_soon is not None:  # opened for nothing: no process held a GPU fd
            self.nvml, self.nvml_soon = self.nvml or self.nvml_soon.result(), None
        if self.nvml is not None:
            self.nvml.close()
            self.nvml = None  # closed once, whoever closes it first (the stream's end, the CLI)
