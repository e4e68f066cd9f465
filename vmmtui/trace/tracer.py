"""A running trace: the eBPF probe loaded, the targets followed, the ring buffer read into events.

``Tracer`` starts a command (held at a gate until its pid is in the kernel's traced set, so its
first syscall is seen), or follows running pids (and their descendants), or everything; children
are added in the kernel at fork. ``events()`` yields ``TraceStarted``, each call as it happens
(a refused pidfd_open/pidfd_getfd followed by its ``CallRefused`` with the cause read from /proc
at that moment), ``TraceLost`` when the ring buffer overflowed, and ``TraceFinished``. No Textual.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Iterator

from vmmtui.stream.events import Event, Notice
from vmmtui.stream.names import shown
from vmmtui.stream.observed import (
    FdTaken,
    PidfdOpened,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    ProcessIdentity,
    TraceCall,
    TraceClock,
    TraceFinished,
    TraceLost,
    TraceStarted,
)
from vmmtui.trace.command import Command, Exit, descendants, killed_words
from vmmtui.trace.cuda import FUNCS, find_libcuda
from vmmtui.trace.identity import identity_of
from vmmtui.trace.loader import RING_BYTES, Probe
from vmmtui.trace.order import KernelOrder
from vmmtui.trace.output import Output
from vmmtui.trace.procfs.nvml import Sampler
from vmmtui.trace.records import Decoder, FileNames
from vmmtui.trace.refusals import explain

#: said before what ``trace -p`` reads from /proc at its start (frame 0)
ALREADY_TRUE = (
    "what the processes held and shared when the trace began, read from /proc as attach reads it "
    "(fds, kcmp, memory maps, NVML): how it came to be shared, and which of them made it, was not seen"
)
#: how long records may wait in the ring buffer (the kernel wakes the reader early for a backlog)
POLL_MS = 25
#: the shortest time between two reads of the ring buffer, unless a read found it full of work
#: (READ_MOST records or more): the kernel wakes a reader that keeps up at every record, and a
#: wake-up, a read and a hand-over cost more than the record's decoding; 10 ms of records at
#: 20,000 calls a second take 0.1 % of the ring buffer
READ_GAP_S = 0.01
READ_MOST = 4096
#: records moved out and not yet decoded, at most (about 3 MB of bytes objects; 50,000 held 15 MB
#: and let a drain decode 50,000 events at once, their peak on top of the order's): past them (the reader of the events is slower
#: than the calls come, as ``--text`` can be) the reader waits and the kernel's ring buffer holds
#: the rest, then counts what it cannot (said as records lost): a long trace's memory is bounded
RAW_MOST = 10_000
#: events held for the kernel's order, at most: past them (a flood that never lets the reader
#: drain the ring) they go by the clock alone, as a reader that keeps up would let them go. An
#: event held costs about 1 KB: 20,000 are 20 MB, and a window of 150 ms at 100,000 calls a second
#: (200,000 held 0.2 GB, the most of `trace --json`'s 0.4 to 1.2 GB under a 50,000 fds/s flood)
ORDER_MOST = 20_000
#: how often the per-CPU loss counters are read: well inside the reorder window, so that a loss
#: is known before the records around it are released
LOSS_READ_S = 0.02
#: how long a stopped trace (q, a signal) decodes the records already out of the kernel before it
#: ends: the user asked to leave, and gets their terminal back within a second however far the
#: decoding was behind (what is left is counted and said)
STOP_DRAIN_S = 0.3


SYSCALLS = [
    "sendmsg",
    "sendmmsg",
    "recvmsg",
    "recvmmsg",
    "(SCM_RIGHTS)",
    "pidfd_open",
    "pidfd_getfd",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "fcntl(F_DUPFD)",
    "memfd_create",
    "mmap",
    "munmap",
    "mremap",
    "ftruncate",
    "fork",
    "exec",
    "exit",
]


#: the calls ``Tracer._calls`` looks into (the others pass as they are)
_NOTED = {PidfdOpened, FdTaken, ProcessForked, ProcessExec, ProcessExit}


class Tracer:
    def __init__(
        self,
        command: list[str] | None = None,
        pids: list[int] | None = None,
        everything: bool = False,
        duration: float | None = None,
        cuda: bool = True,
        libcuda: str | None = None,
        stdout: int | Output | None = None,
        nvml: bool = True,
        ring_bytes: int = RING_BYTES,
        in_process: bool = False,
    ) -> None:
        self.command = command or []
        #: the traced code runs in this process (``vmmtui.tracing``, the pytest plugin): its
        #: objects are the caller's, so the collector is left as it is (``gc.freeze`` would keep
        #: every cycle the tests make for the rest of the run), and a stop reads every record the
        #: kernel already wrote (the block's calls are all made by then: none may go unread)
        self.in_process = in_process
        self.use_nvml = nvml  # NVML's charge per process, in what is true at the start (-p)
        #: the command's stdout: 2 under --json (vmmtui's stdout is the stream); an ``Output``
        #: under the inspector (it owns the terminal: stdout and stderr are captured)
        self.stdout = stdout
        self.pids = list(pids or [])
        self.everything = everything
        self.duration = duration
        self.want_cuda, self.libcuda = cuda, libcuda
        self.probe: Probe | None = None
        self.proc: subprocess.Popen | None = None
        #: the command's process tree (``trace -- CMD``): tied to our life, ended with the trace
        self.tree: Command | None = None
        #: said once the tree was SIGKILLed for ignoring a stop signal
        self.killed: list[Notice] = []
        self.exit: Exit | None = None
        self.alive: set[int] = set()
        #: pids seen in a container or a PID namespace of their own (their children are read too)
        self.placed: set[int] = set()
        self.stopping = False
        #: --duration ended the trace (not the command's end, nor a stop)
        self.timed_out = False
        #: the signal that ended a trace of pids or of everything (its exit is 128 + it)
        self.stopped_by: int | None = None
        self.files = FileNames()
        self.probes: list[str] = []
        self.unprobed: list[str] = []
        self.count = 0
        self.lost = 0
        #: the calls the kernel looked at and recorded nothing of, by kind (read at the end)
        self.unrecorded: dict[str, int] = {}
        #: when (monotonic) the per-CPU loss counters were last read
        self.lost_checked = 0.0
        #: the kernel's order: records wait here until those stamped before them have arrived
        self.order = KernelOrder()
        #: every record stamped before this (the kernel's clock) has been read out of the ring:
        #: the reader found every CPU's ring drained after this time (0: not yet)
        self.read_upto_ns = 0
        self.ktime0 = 0
        #: set when events() has ended (and closed the probe): another thread may then go on
        self.finished = threading.Event()
        self.pidfds: dict[tuple[int, int], int] = {}
        self.ring_bytes = ring_bytes
        self.decoder = Decoder(self.files)
        #: raw records, moved out of the ring buffer by a thread that does nothing else
        self.raw: queue.SimpleQueue[list[bytes]] = queue.SimpleQueue()
        #: records in ``raw`` (the reader adds, the consumer takes away)
        self._queued = 0
        self._queued_lock = threading.Lock()
        self._reading = threading.Event()
        #: set to wake the reader from its pause between reads (the trace is ending)
        self._halt = threading.Event()
        self._reader: threading.Thread | None = None
        #: records taken from the kernel but not decoded: the trace was stopped first
        self.unread = 0
        #: batches a stop left undecoded in the loop, first in the final drain (ring order)
        self._held: list[list[bytes]] = []

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Load and attach (ProbeUnavailable: one line), then start or follow the targets."""
        self.ktime0 = time.monotonic_ns()
        self.probe = Probe(ring_bytes=self.ring_bytes)
        try:
            self.probe.attach_syscalls()
            self.probe.configure(self.everything, os.getpid())
            self.probes = [f"syscalls ({self.probe.flavour}): {', '.join(SYSCALLS)}"]
            if self.probe.release_missing:
                self.unprobed.append(
                    f"fds freed unreceived in a socket's queue: {self.probe.release_missing}"
                )
            else:
                self.probes.append(
                    "fds freed unreceived in a socket's queue (kfree_skb) or dropped by a read "
                    "(skb_copy_datagram_iovec)"
                )
            targets = descendants(set(self.pids)) if self.pids else set()
            for pid in targets:
                self.probe.follow(pid)
            self.alive = set(targets)
            self._attach_cuda(sorted(targets))
            if self.command:
                self._spawn()
        except BaseException:
            self.close()
            raise

    def _attach_cuda(self, pids: list[int]) -> None:
        if not self.want_cuda:
            self.unprobed.append("CUDA calls: not asked for (--no-cuda)")
            return
        lib = self.libcuda or find_libcuda(pids)
        if lib is None:
            self.unprobed.append(
                "CUDA calls: no libcuda.so.1 found (no NVIDIA driver here; --libcuda PATH names one)"
            )
            return
        assert self.probe is not None
        unprobed = self.probe.attach_uprobes(lib, list(enumerate(FUNCS)))
        done = [func for func in FUNCS if func not in unprobed]
        missing = [f"{func} ({why})" for func, why in unprobed.items()]
        if done:
            self.probes.append(f"CUDA: {', '.join(done)} in {lib}")
        if missing:
            self.unprobed.append(f"CUDA: {', '.join(missing)} not probed in {lib}")

    def _spawn(self) -> None:
        """Start the command behind a gate (/bin/sh waits for one line, then execs it in place:
        same pid), so that the kernel follows it from its first instruction."""
        assert self.probe is not None
        self.tree = Command(self.command, gate=True, stdout=self.stdout)
        self.proc = self.tree.start()
        self.probe.follow(self.proc.pid)
        self.alive.add(self.proc.pid)
        self.tree.release()

    # -- run -----------------------------------------------------------------------------------
    def forward(self, signum: int) -> None:
        """A signal for the traced command (``trace -- CMD``); otherwise it ends the trace."""
        if self.tree is not None:
            self.tree.forward(signum)  # a stop signal it ignores becomes SIGKILL after a grace
            if self.exit is not None and self.tree.stop_signals > 1:
                self.stopping = True  # a second one: stop waiting for what is still traced
        else:
            self.stopping = True
            self.stopped_by = self.stopped_by or signum

    def _reap(self) -> None:
        if self.tree is None:
            return
        if killed := self.tree.enforce():  # a stop signal it ignored: its grace is over
            self.killed.append(Notice(killed_words(killed)))
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.tree.reaped(pid, status):
                self.exit = self.tree.exit

    def _done(self, t0: float) -> bool:
        if self.stopping:
            return True
        if self.duration is not None and time.monotonic() - t0 >= self.duration:
            self.timed_out = True  # --duration ended it (the command may still have been running)
            return True
        if self.everything:
            return False
        if self.command:
            return self.exit is not None and not self.alive
        return not self.alive

    def _recheck_alive(self) -> None:
        """A process whose exit record was lost (ring buffer full) is not waited for forever."""
        self.alive = {p for p in self.alive if os.path.exists(f"/proc/{p}")}

    def events(self, on_batch: Callable[[], None] | None = None) -> Iterator[Event]:
        """The trace's events; ``on_batch`` runs after each batch (the CLI flushes its output)."""
        assert self.probe is not None
        t0 = time.monotonic()
        yield TraceStarted(
            "ebpf",
            sorted(self.alive),
            self.command,
            self.everything,
            "",
            self.probes,
            self.unprobed,
            self.ktime0,
        )
        if self.pids:
            yield from self._already_true()
        last_check = t0
        #: NVML's readings into the stream (the GPU ledger's charges), once a second where it differs
        gpu = Sampler.start(self.use_nvml)
        self._start_reader()
        # a full collection of the ledger's many objects holds the GIL for long enough to stall
        # the ring buffer's reader: objects made so far are left alone, full collections are rare
        thresholds = gc.get_threshold()
        if not self.in_process:
            gc.collect()
            gc.freeze()
            gc.set_threshold(max(thresholds[0], 10_000), 50, 1_000)
        try:
            while True:
                self._reap()
                while self.killed:
                    yield self.killed.pop(0)
                upto = self.read_upto_ns  # before the drain: what it read is in the queue
                yield from self.order.extend(self._drain(POLL_MS))
                yield from self.order.release(self._release_point(upto))
                if on_batch is not None:
                    on_batch()
                if time.monotonic() - last_check > 1.0:
                    last_check = time.monotonic()
                    self._recheck_alive()
                    # the kernel's clock (CLOCK_MONOTONIC, as bpf_ktime_get_ns): what waits on
                    # time is decided in a quiet run too
                    yield from self.order.push(TraceClock(time.monotonic_ns()))
                for reading in gpu.due(time.monotonic(), 0.0, time.monotonic_ns()) if gpu else []:
                    yield from self.order.push(reading)
                if self._done(t0):
                    break
            self._stop_reader()
            if self.probe is not None:
                self.probe.detach()  # no more records: the user waits for nothing that comes now
            # what the kernel had written before: all of it when the trace ended by itself; when
            # it was stopped (q, a signal), what STOP_DRAIN_S decodes, the rest counted and said
            # (in process: all of it, however long it takes)
            drain_s = float("inf") if self.in_process else STOP_DRAIN_S
            until = time.monotonic() + drain_s if self.stopping else None
            yield from self.order.extend(self._drain(0, until))
            if self.unread:
                yield Notice(
                    f"the trace was stopped with {self.unread} records of the kernel not yet "
                    "read: the calls they hold are not in this trace"
                )
            self._reap()
            if self.probe is not None:  # detached: its maps are still there to read
                self.unrecorded = self.probe.unrecorded()
            yield from self.order.extend(
                [*self._calls(self.decoder.flush()), *self._losses(force=True)]
            )
            yield from self.order.flush()
        finally:
            # what the trace made stays out of the collector's reach too: given back to it (the
            # old unfreeze), the next full collection walked every event kept, with the
            # interpreter's lock held, for seconds, just as the user had asked to quit
            if not self.in_process:
                gc.freeze()
                gc.set_threshold(*thresholds)
            self._stop_reader()
            if gpu is not None:
                gpu.close()
            self.close()
            self.finished.set()
        ex = self.exit or Exit(None, None)
        yield TraceFinished(
            self.command, ex.code, ex.signal, self.count, self.lost,
            round(time.monotonic() - t0, 3), unrecorded=self.unrecorded,
        )  # fmt: skip

    def _already_true(self) -> Iterator[Event]:
        """What running pids already hold and share when the trace starts (frame 0), read as
        attach reads it: fds, kcmp shares, mapped memfds and /dev/shm, NVML. The probe is attached
        first, so a call made meanwhile waits in the ring buffer and follows these events."""
        from vmmtui.trace.procfs.follow import Follower

        yield Notice(ALREADY_TRUE)
        f = Follower(set(self.alive), use_nvml=self.use_nvml)
        try:
            yield from f.poll()
        finally:
            f.close()

    def _release_point(self, upto: int) -> int:
        """The clock ``KernelOrder.release`` is given: now, but never past the time the reader last
        drained every ring (``upto``, read before the drain that took its records). A reader
        behind the calls (a flood, a busy machine) leaves records older than the window in the
        ring: released by the clock alone, a holder's exit read late went after its exporter's,
        and the exporter's exit claimed it held the memory still. Past ``ORDER_MOST`` events held,
        the clock alone (memory is bounded; the straggler is counted as late)."""
        now = time.monotonic_ns()
        if self._reader is None or len(self.order) > ORDER_MOST:
            return now
        return min(now, upto)

    def _start_reader(self) -> None:
        self._reading.set()
        self._halt.clear()
        self._reader = threading.Thread(target=self._read, name="vmmtui-trace-ring", daemon=True)
        self._reader.start()

    def _stop_reader(self) -> None:
        self._reading.clear()
        self._halt.set()
        if self._reader is not None:
            self._reader.join()
            self._reader = None

    def _read(self) -> None:
        """The ring buffer's reader: it only moves raw records into ``self.raw`` (decoding is the
        consumer's), so that the kernel's buffer empties at the rate the kernel fills it."""
        probe = self.probe
        assert probe is not None
        while self._reading.is_set():
            t = time.monotonic()
            if self._queued >= RAW_MOST:  # the consumer is behind: the ring buffer holds the rest
                self._halt.wait(READ_GAP_S)
                continue
            before = time.monotonic_ns()  # CLOCK_MONOTONIC, as bpf_ktime_get_ns
            records = probe.poll(POLL_MS)
            if records:
                self._put(records)
            if len(records) < READ_MOST:  # every ring drained: all stamped before it is out
                self.read_upto_ns = before
            if len(records) < READ_MOST:  # not a backlog: the next records wait to come together
                self._halt.wait(READ_GAP_S - (time.monotonic() - t))
        records = probe.poll(0)
        if records:
            self._put(records)

    def _put(self, records: list[bytes]) -> None:
        with self._queued_lock:
            self._queued += len(records)
        self.raw.put(records)

    def _got(self, batch: list[bytes]) -> list[bytes]:
        with self._queued_lock:
            self._queued -= len(batch)
        return batch

    def _drain(self, timeout_ms: int, until: float | None = None) -> list[Event]:
        """The records moved out so far, decoded a batch at a time. A stop (``self.stopping``) ends the decoding
        at the end of a batch, or, after the reader has stopped, at ``until`` (monotonic): the
        records left are counted in ``self.unread``."""
        assert self.probe is not None
        if self._reader is None:  # the reader has stopped: what it left, and the ring's rest
            while records := self.probe.poll(0):
                self._put(records)
        try:
            batch = self.raw.get(timeout=timeout_ms / 1000) if timeout_ms else self.raw.get_nowait()
        except queue.Empty:
            batch = []
        batches, self._held = [*self._held, self._got(batch)], []
        while True:
            try:
                batches.append(self._got(self.raw.get_nowait()))
            except queue.Empty:
                break
        out: list[Event] = []
        for k, batch in enumerate(batches):
            if self.stopping and (until is None or time.monotonic() > until):
                if until is not None:  # stopped: what is left is said, not decoded
                    self.unread += sum(len(b) for b in batches[k:])
                else:  # the loop stops at its next turn: these wait for the final drain
                    self._held = batches[k:]
                break
            out += self._calls(self.decoder.batch(batch))
        out += self._losses()
        return out

    def _calls(self, calls: list[TraceCall]) -> list[Event]:
        """The calls as the stream has them: the processes alive followed, a pidfd_getfd's target
        named, a refusal followed by its cause. Most calls are none of these: one type lookup."""
        self.count += len(calls)
        if not any(type(e) in _NOTED for e in calls):
            return calls  # type: ignore[return-value]
        out: list[Event] = []
        for e in calls:
            kind = type(e)
            if kind not in _NOTED:
                out.append(e)
                continue
            if isinstance(e, PidfdOpened) and e.fd >= 0:
                self.pidfds[(e.pid, e.fd)] = e.target
            elif isinstance(e, FdTaken) and not e.target:
                e = dataclasses.replace(e, target=self._pidfd_target(e.pid, e.pidfd))
            who: ProcessIdentity | None = None
            if isinstance(e, ProcessForked):
                self.alive.add(e.child)
                if e.pid in self.placed:  # a container's child: its own pid in there
                    who = self._identity(e.child, e.ktime)
            elif isinstance(e, ProcessExec):
                who = self._identity(e.pid, e.ktime)
            elif isinstance(e, ProcessExit):
                self.alive.discard(e.pid)
                self.placed.discard(e.pid)
            out.append(e)
            if who is not None:
                out.append(who)
            if isinstance(e, FdTaken) and e.fd < 0:
                facts = self.decoder.refusals.pop(e.tid, None)  # the kernel's, read at the call
                out.append(
                    explain("pidfd_getfd", e.pid, e.target, -e.fd, e.target_fd, e.ktime, facts)
                )
            elif isinstance(e, PidfdOpened) and e.fd < 0:
                out.append(explain("pidfd_open", e.pid, e.target, -e.fd, -1, e.ktime))
        return out

    def _identity(self, pid: int, ktime: int) -> ProcessIdentity | None:
        """``pid``'s container and pid in its own namespace, where either is there to say."""
        who = identity_of(pid)
        c = who.container
        if c is None and who.inner_pid is None:
            self.placed.discard(pid)
            return None
        self.placed.add(pid)
        return ProcessIdentity(
            pid, shown(c.label(), 120) if c else "", c.pod if c else "", who.inner_pid, ktime
        )

    def _losses(self, force: bool = False) -> Iterator[Event]:
        """Each CPU's lost records since the last look, with the window they were lost in."""
        assert self.probe is not None
        now = time.monotonic()
        if not force and now - self.lost_checked < LOSS_READ_S:
            return
        self.lost_checked = now
        for w in self.probe.loss_windows():
            self.lost += w.count
            yield TraceLost(w.count, w.t_last_ns, w.cpu, w.t_first_ns, w.t_last_ns)

    def _pidfd_target(self, pid: int, pidfd: int) -> int:
        """The process a pidfd names: from its pidfd_open, else the kernel's fdinfo (``Pid:``)."""
        if (pid, pidfd) in self.pidfds:
            return self.pidfds[(pid, pidfd)]
        try:
            with open(f"/proc/{pid}/fdinfo/{pidfd}") as f:
                for line in f:
                    if line.startswith("Pid:"):
                        return max(int(line.split()[1]), 0)
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def close(self) -> None:
        """The end: what still runs of the command's tree is ended (as on q), the probe closed."""
        if self.tree is not None:
            self.tree.close()
        if self.probe is not None:
            self.probe.close()
            self.probe = None
