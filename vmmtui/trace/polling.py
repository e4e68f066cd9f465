"""``vmmtui trace --poll``: the trace's event stream, made by polling /proc instead of eBPF.

Where eBPF is refused (no root, no BTF, no libbpf) or ``--poll`` asks for it, the same command
follows the same targets with attach's engine (``vmmtui.trace.procfs.follow.Follower``: fd tables, kcmp,
maps, sockets, NVML) and emits onto the same stream: ``TraceStarted(mode="polling")``, the attach
events of each poll, at the end the fd tables, leftover files, what polling may have missed and a
``WatchFinished`` summary, then ``TraceFinished``. The object has the ``Tracer``'s interface
(``start``, ``events``, ``forward``, ``close``, ``exit``, ``stopping``, ``stopped_by``,
``finished``), so the CLI and
every renderer take either. No Textual.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

from vmmtui.stream.events import Event, Notice, WatchFinished
from vmmtui.stream.observed import TraceFinished, TraceStarted
from vmmtui.trace.command import Command, Exit, killed_words
from vmmtui.trace.output import Output
from vmmtui.trace.procfs.follow import Follower
from vmmtui.trace.procfs.leaks import leftover_files
from vmmtui.trace.procfs.scan import children, holders_of_memory
from vmmtui.trace.procfs.watch import Watch

#: how often ``--all`` looks for new processes holding shared memory
RESCAN_S = 1.0
#: the slowest rate polling may run at: slower misses too much to be worth calling a trace
SLOWEST_S = 0.25

#: what polling cannot see, said in the stream's first event (``TraceStarted.unprobed``)
UNPROBED = [
    "calls: polling reads what is there at each poll, not the calls that moved it "
    "(sendmsg/recvmsg, pidfd_getfd, close, dup, fork): a share made and undone between two "
    "polls leaves no trace, and a direction not seen is said as unknown",
    "CUDA calls: not seen by polling (the driver's fds, NVML's charge and kcmp are)",
]


def fallback_words(reason: str) -> str:
    """The one line that says the trace polls because eBPF was refused (stream and stderr)."""
    return (
        f"eBPF unavailable: {reason} — polling /proc instead: shares made and undone between two "
        "polls can be missed, a direction not seen is unknown, CUDA calls are not seen"
    )


class PollingTrace:
    """A trace of a command (``command``), of running pids and their children (``pids``) or of every
    process holding shared memory (``everything``), by polling /proc every ``interval`` seconds.

    ``once``: one poll (what is true now) and the end. ``leaks``: also look for /dev/shm and
    socket files of dead owners at the end (always done for a command). ``reason``: why eBPF was
    not used ("" when ``--poll`` asked), said in the stream."""

    mode = "polling"

    def __init__(
        self,
        command: list[str] | None = None,
        pids: list[int] | None = None,
        everything: bool = False,
        duration: float | None = None,
        interval: float = 0.25,
        nvml: bool = True,
        stdout: int | Output | None = None,
        reason: str = "",
        once: bool = False,
        leaks: bool = False,
    ) -> None:
        self.command = command or []
        self.pids = list(dict.fromkeys(pids or []))
        self.everything = everything
        self.duration = duration
        self.interval = min(interval, SLOWEST_S)
        self.use_nvml = nvml
        self.stdout = stdout
        self.reason = reason
        self.once, self.leaks = once, leaks
        self.watch: Watch | None = None
        self.follower: Follower | None = None
        self.stopping = False
        #: --duration ended the trace (not the command's end, nor a stop)
        self.timed_out = False
        #: the signal that ended a poll of pids or of everything (its exit is 128 + it), as the
        #: Tracer's
        self.stopped_by: int | None = None
        self.count = 0
        self.started_wall = time.time()
        self.finished = threading.Event()

    @property
    def exit(self) -> Exit | None:
        """How the command ended (``Exit``: ``code``, ``signal``, ``status``), or None."""
        return self.watch.exit if self.watch is not None else None

    @property
    def tree(self) -> Command | None:
        """The command it started and its tree (None: it follows running processes)."""
        return self.watch.tree if self.watch is not None else None

    def start(self) -> None:
        """Start the command (``vmmtui.trace.procfs.watch.CommandNotFound``: 127/126 and one line) or
        take the targets."""
        if self.command:
            self.watch = Watch(self.command, self.interval, self.use_nvml, self.stdout)
            self.watch.start()
            self.follower = self.watch.follower
            return
        targets = self.pids
        if self.everything:
            targets = holders_of_memory(None if os.geteuid() == 0 else os.geteuid())
        self.follower = Follower(
            set(targets), tree=True, use_nvml=self.use_nvml, interval=self.interval
        )

    def forward(self, signum: int) -> None:
        """A signal for the traced command (``trace -- CMD``); otherwise it ends the trace."""
        if self.watch is not None:
            self.watch.forward(signum)
            self.stopping = self.stopping or self.watch.stop
        else:
            self.stopping = True
            self.stopped_by = self.stopped_by or signum

    def _done(self, t0: float) -> bool:
        f = self.follower
        assert f is not None
        if self.stopping or self.once:
            return True
        if self.duration is not None and time.monotonic() - t0 >= self.duration:
            self.timed_out = True  # --duration ended it (the command may still have been running)
            return True
        if self.watch is not None:
            return self.watch.exit is not None and (not self.watch.children_left or self.watch.stop)
        return not self.everything and not f.tracker.alive

    def _wait(self, t0: float) -> None:
        """Sleep until the next poll, waking early for a stop (a signal, the view's ``q``)."""
        end = time.monotonic() + self.interval
        while not self.stopping and (now := time.monotonic()) < end:
            if self.duration is not None and now - t0 >= self.duration:
                return
            time.sleep(min(0.05, end - now))

    def events(self, on_batch: Callable[[], None] | None = None) -> Iterator[Event]:
        f = self.follower
        assert f is not None
        t0 = time.monotonic()
        me = os.getpid()
        probes = [
            f"/proc every {self.interval:g} s: fd tables, kcmp, memory maps, unix sockets"
            + (", NVML" if self.use_nvml else "")
        ]
        yield TraceStarted(
            "polling",
            sorted(f.targets),
            self.command,
            self.everything,
            self.reason,
            probes,
            list(UNPROBED),
            time.monotonic_ns(),
        )
        if self.reason:
            yield Notice(fallback_words(self.reason))
        rescan = t0 + RESCAN_S
        try:
            while True:
                if self.watch is not None:
                    self.watch._reap()
                    orphans = children(me)  # orphans re-parented to vmmtui (subreaper)
                    f.tracker.discovered.update(orphans)
                    f.targets.update(orphans)
                batch = f.poll()
                self.count += len(batch)
                yield from batch
                if on_batch is not None:
                    on_batch()
                if self.everything and time.monotonic() >= rescan:
                    f.targets.update(holders_of_memory(None if os.geteuid() == 0 else os.geteuid()))
                    rescan = time.monotonic() + RESCAN_S
                if self._done(t0):
                    break
                self._wait(t0)
            yield from self._end(f)
        finally:
            f.close()
            self.finished.set()
        ex = self.exit
        yield TraceFinished(
            self.command,
            ex.code if ex else None,
            ex.signal if ex else None,
            self.count,
            0,
            round(time.monotonic() - t0, 3),
            mode="polling",
        )

    def _end(self, f: Follower) -> Iterator[Event]:
        """What the end tells: the last poll, the fd tables, leftover files, what may be missed."""
        if self.watch is not None and self.watch.killed:
            text = killed_words(self.watch.killed)
            f.unseen.append(text)
            yield Notice(text)
        if not self.once:
            yield from f.poll()
            if self.watch is not None:
                self.watch._reap()
        yield from f.snapshots()
        if self.command or self.leaks or self.once:
            live = {s.path for s in f.last.sockets.sockets.values()} if f.last else set()
            since = self.started_wall if self.command else None
            seen = f.followed if self.command else None  # a command's tree: only its own files
            for leak in leftover_files(since, f.bound_paths, live, time.monotonic() - f.t0, seen):
                f.all_leaks.append(leak)
                yield leak
            yield from f.strangers()
        if not self.once:
            yield from f.missed()
        ex = self.exit
        yield WatchFinished(
            self.command,
            ex.code if ex else None,
            ex.signal if ex else None,
            len(f.tracker.names),
            len(f.tracker.shared_said),
            len(f.all_leaks),
            round(time.monotonic() - f.t0, 3),
            list(f.unseen),
        )

    def close(self) -> None:
        """The end: what still runs of the command's tree is ended (as on q)."""
        if self.watch is not None:
            self.watch.close()
        if self.follower is not None and not self.finished.is_set():
            self.follower.close()
