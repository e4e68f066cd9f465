"""One observed run of programs, whatever observes them: a ``Source`` (the eBPF tracer, the
polling, a recording) gives the events, the ledger folds them and adds its findings, every sink
(the recording, the exporters, a screen) gets the same stream, and the end says the one count of
findings. ``vmmtui trace`` (text, JSON, the inspector) and ``vmmtui replay`` of a trace all run
it, so the same run gives the same events, the same findings and the same count everywhere.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from vmmtui.model.findings import Counted, Tally, Weight
from vmmtui.model.handles import NEVER_IMPORTED_S
from vmmtui.model.ledger import Ledger
from vmmtui.model.policy import Fact, counted_as, tally
from vmmtui.model.refcounts import Refcounts
from vmmtui.model.world import Keyframes, Made, World
from vmmtui.stream.events import Event, Leak, ProcessSeen, ProcessUnreadable, WatchFinished
from vmmtui.stream.gpu import GpuTable
from vmmtui.stream.observed import (
    CapabilityProbe,
    LedgerFinding,
    PinnedBytes,
    TraceFinished,
    TraceStarted,
)
from vmmtui.trace.output import Output

if TYPE_CHECKING:
    from vmmtui.trace.command import Command, Exit
    from vmmtui.trace.tracer import Tracer

#: what the ledger says of a run (its findings, the calls that probed a capability): found again
#: from the calls, never taken from a source
MADE_BY_THE_LEDGER = (LedgerFinding, CapabilityProbe, PinnedBytes, GpuTable)
#: the events ``TraceSession.through`` takes aside (the start, the end, polling's findings, the
#: world's own): every other event is folded the plain way (``TraceSession.marked``)
_ASIDE = (*MADE_BY_THE_LEDGER, TraceFinished, TraceStarted, ProcessUnreadable, Leak, WatchFinished)


#: whether an event type is folded the plain way, asked once per type
_PLAIN: dict[type, bool] = {}
#: how long the command's tree gets after SIGTERM before SIGKILL
TERM_GRACE_S = 0.8


class Source(Protocol):
    """What observes the programs: ``events()`` until the run ends; ``stopping`` ends it early.
    ``pids``: the running processes it was asked to follow (``trace -p``); ``tree`` the command
    it started (None: none, or not yet), ``exit`` how that command ended (None: not yet)."""

    stopping: bool
    pids: list[int]
    #: the command it runs ([]: none)
    command: list[str]
    #: set once its events have ended (the probes detached, the polls over)
    finished: threading.Event

    @property
    def tree(self) -> Command | None: ...

    @property
    def exit(self) -> Exit | None: ...

    def events(self, on_batch: Callable[[], None] | None = None) -> Iterator[Event]: ...

    def close(self) -> None:
        """What it holds goes (the probe, the poller's NVML), the command's tree with it."""
        ...


@dataclass(frozen=True)
class TraceRequest:
    """What to observe and how, as ``trace``, ``attach`` and ``watch`` ask it: a command, running
    pids or every process; eBPF or polling (``poll``, or ``once``: one poll); what to probe."""

    command: tuple[str, ...] = ()
    pids: tuple[int, ...] = ()
    everything: bool = False
    poll: bool = False
    #: polling: seconds between polls (None: 0.1 for a command, 0.25 for pids)
    interval: float | None = None
    nvml: bool = True
    cuda: bool = True
    libcuda: str | None = None
    ring_bytes: int = 32 << 20
    duration: float | None = None
    #: attach: one poll, then the end; look for leftover files at the end
    once: bool = False
    leaks: bool = False
    #: the traced code runs in this process (``vmmtui.tracing``): see ``Tracer.in_process``
    in_process: bool = False

    @property
    def wants_ebpf(self) -> bool:
        return not (self.poll or self.once)

    def tracer(self, stdout: int | Output | None = None) -> Tracer:
        """The eBPF source, not started (the kernel checks its programs when it starts).
        ``stdout``: where the command's output goes (``Command``'s: an fd, an ``Output``)."""
        from vmmtui.trace.tracer import Tracer

        return Tracer(
            list(self.command),
            list(self.pids),
            self.everything,
            self.duration,
            self.cuda,
            self.libcuda,
            stdout=stdout,
            nvml=self.nvml,
            ring_bytes=self.ring_bytes,
            in_process=self.in_process,
        )

    def start(self, stdout: int | Output | None = None) -> tuple[Source, str]:
        """The running source: eBPF, or polling where asked or where eBPF is refused, with why
        ("" when asked). ``CommandNotFound`` when the command cannot be started."""
        from vmmtui.trace.polling import PollingTrace

        reason = ""
        if self.wants_ebpf:
            from vmmtui.trace.loader import ProbeUnavailable, why_not

            reason = why_not() or ""
            if not reason:
                tracer = self.tracer(stdout)
                try:
                    tracer.start()
                    return tracer, ""
                except ProbeUnavailable as exc:
                    reason = str(exc)
        polling = PollingTrace(
            list(self.command),
            list(self.pids),
            self.everything,
            self.duration,
            self.interval or (0.1 if self.command else 0.25),
            self.nvml,
            stdout=stdout,
            reason=reason,
            once=self.once,
            leaks=self.leaks,
        )
        polling.start()
        return polling, reason


class RecordingSource:
    """A recording's events as a source. The findings it recorded are left out: the ledger finds
    them again (in today's words), as it found them live."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.recorded = list(events)
        self.stopping = False
        self.command: list[str] = []
        self.pids: list[int] = []
        self.finished = threading.Event()
        #: a recording starts no command
        self.tree: Command | None = None
        self.exit: Exit | None = None

    def events(self, on_batch: Callable[[], None] | None = None) -> Iterator[Event]:
        try:
            for e in self.recorded:
                if self.stopping:
                    return
                if not isinstance(e, MADE_BY_THE_LEDGER):
                    yield e
        finally:
            self.finished.set()

    def close(self) -> None:
        """A recording holds nothing open."""


class TraceSession:
    """The pipeline, once: source → ledger → findings → sinks. ``events()`` is the whole stream
    (each event, then the findings it brings), each passed to every sink as it goes."""

    def __init__(
        self,
        source: Source,
        sinks: Sequence[Callable[[Event], object]] = (),
        live: bool = True,
        never_imported_s: float | None = None,
        world: World | None = None,
        keyframes: bool = False,
    ) -> None:
        """``never_imported_s``: seconds with no import before an export is said never imported
        (None: ``NEVER_IMPORTED_S``); ``world``: the run's world, where a sink reads it too (else
        a new one); ``keyframes``: keep a clone of it every ``model.world.EVERY`` events, so that
        the world at any event can be asked (a replay's step back, its pages)."""
        self.source = source
        self.sinks = list(sinks)
        #: the one fold of the run: the ledger and its refcount book (``model/world.py``)
        self.world = (
            world
            if world is not None
            else World(NEVER_IMPORTED_S if never_imported_s is None else never_imported_s)
        )
        self.ledger: Ledger = self.world.ledger
        self.refs: Refcounts = self.world.refs
        self.keyframes: Keyframes | None = Keyframes(self.world) if keyframes else None
        #: the live run reads who ``-p``'s processes are from /proc (a recording has them)
        self.live = live
        self.unreadable: set[int] = set()
        #: findings the polling said itself (leftover files, unreadable processes)
        self.polled: list[Counted] = []
        self.finished: TraceFinished | None = None

    @classmethod
    def replay(cls, events: Iterable[Event], keyframes: bool = False) -> TraceSession:
        return cls(RecordingSource(events), live=False, keyframes=keyframes)

    def fold(self, e: Event) -> list[Made]:
        """One event into the run's world: the findings it brings (what ``events`` adds after
        it), the world kept as a keyframe where its turn comes."""
        made = self.world.fold(e)
        if self.keyframes is not None:
            self.keyframes.folded(e, self.world)
        return made

    def _finish(self) -> list[LedgerFinding]:
        return self.world.finish()

    def count(self) -> Tally:
        """The one count of findings: the ledger's (shares included) and the polling's."""
        return tally(self.polled, self.ledger.findings.by)

    def _out(self, e: Event) -> Event:
        for sink in self.sinks:
            sink(e)
        return e

    def events(self, on_batch: Callable[[], None] | None = None) -> Iterator[Event]:
        for e, _ in self.marked(on_batch):
            yield e

    def marked(self, on_batch: Callable[[], None] | None = None) -> Iterator[tuple[Event, bool]]:
        """The stream, each event with whether it is a call that matters (the world's one rule,
        asked just before the world folds it): the call timeline cuts its frames there, so it
        folds nothing of its own."""
        world, sinks = self.world, self.sinks
        for e in self.source.events(on_batch=on_batch):
            kind = type(e)
            plain = _PLAIN.get(kind)
            if plain is None:
                plain = _PLAIN[kind] = not issubclass(kind, _ASIDE)
            if not plain:  # the start, the end, polling's findings, what the world makes
                yield from self.through(e)
                continue
            # the common event (a call), as ``through`` takes it, without its two generators:
            # tens of thousands a second go this way
            yield e, world.matters(e)
            made = self.fold(e)
            for sink in sinks:
                sink(e)
            for f in made:
                yield self._out(f), False
        if self.finished is None:  # a source cut short (a recording that stops mid-run)
            for end in self._finish():
                yield self._out(end), False

    def through(self, e: Event) -> Iterator[tuple[Event, bool]]:
        """One event of the source through the run: the event with its mark, then what the world
        found in it. The caller gets the event before the world folds it (the text asks the
        world as it stood before: ``worth_a_line``), every sink after (an exporter reads the
        world as the event left it), each in the stream's order. ``marked`` is this over the
        source; whoever has its events one at a time pushes them here."""
        if isinstance(e, MADE_BY_THE_LEDGER):
            return  # made by the world below, never taken from a source
        if isinstance(e, TraceFinished):
            for end in self._finish():
                yield self._out(end), False
            t = self.count()
            self.finished = dataclasses.replace(
                e, findings=t.total, problems=t.bad, quiet=t.quiet, quiet_by=t.quiet_by
            )
            yield self._out(self.finished), False
            return
        if isinstance(e, ProcessUnreadable):
            self.unreadable.add(e.pid)
            self.polled.append(Counted("unreadable", "", Weight.QUIET, Fact.NOT_READ))  # a fact
        elif isinstance(e, Leak):
            self.polled.append(counted_as(e))
        elif isinstance(e, WatchFinished):  # its leaks: the policy's problems, not every finding
            e = dataclasses.replace(e, leaks=tally(self.polled).bad)
        yield from self._folded(e)
        if isinstance(e, TraceStarted) and e.mode == "ebpf" and self.live:
            for seen in seen_now(list(self.source.pids)):
                yield from self._folded(seen)

    def _folded(self, e: Event) -> Iterator[tuple[Event, bool]]:
        yield e, self.world.matters(e)
        made = self.fold(e)
        self._out(e)
        for f in made:
            yield self._out(f), False

    def push(self, *events: Event) -> list[Event]:
        """``events`` through the run, one after the other (``through``): the stream they make."""
        return [out for e in events for out, _ in self.through(e)]

    def stop(self) -> bool:
        """End the run: the traced command's tree is stopped (a ``-p`` target is not ours); True
        when the command was still running."""
        self.source.stopping = True
        return stop_command(self.source)


def refold(events: Iterable[Event]) -> list[Event]:
    """A recording's stream as the pipeline makes it today: its findings found again."""
    return list(TraceSession.replay(events).events())


def stop_command(source: Source) -> bool:
    """SIGTERM to the traced command and everything it started (orphans too: they carry its
    mark), SIGKILL to what is left after TERM_GRACE_S (a ``trace -p`` target is not ours: it is
    left alone). ``vmmtui.trace.command`` is the one place that knows the tree. True when the
    command was still running (its exit status is then ours, not its own)."""
    from vmmtui.trace.command import alive

    tree = source.tree
    if tree is None or source.exit is not None:
        return False
    running = alive(tree.pid)
    tree.stop(TERM_GRACE_S)
    return running


def seen_now(pids: list[int]) -> list[Event]:
    """``ProcessSeen`` for processes already running (``trace -p``): their name, parent, command
    line and uid as /proc says now (the trace sees no exec of theirs to name them)."""
    from vmmtui.trace.identity import identity_of

    out: list[Event] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            name = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode("utf-8", "replace")
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            uid = os.stat(f"/proc/{pid}").st_uid
        except (OSError, ValueError):
            continue
        who = identity_of(pid)
        c = who.container
        label = c.label() if c else ""
        out.append(
            ProcessSeen(
                pid,
                ppid,
                name,
                cmdline[:500],
                uid,
                0.0,
                None,
                label,
                c.pod if c else "",
                who.inner_pid,
            )
        )
    return out
