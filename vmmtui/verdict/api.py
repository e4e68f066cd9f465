"""The verdict as an assertion: trace a block of Python code and the processes it starts, and get
what the inspector would say of it as data.

    import vmmtui

    with vmmtui.tracing(allow={"opened-twice"}, max_pinned_bytes=64 << 20) as t:
        run_weight_sync(steps=4)
    assert not t.problems, t.report()

The block runs in this process, so the trace follows this process and every process it starts
(fork, ``multiprocessing``, ``subprocess``: the tracer follows forks of a traced pid): eBPF where
this process may load it (root, or CAP_BPF + CAP_PERFMON), polling of ``/proc`` otherwise, said in
``t.mode`` and ``t.reason``. The events go through the one pipeline of ``vmmtui trace``
(``pipeline.session.TraceSession``: the ledger, its refcount book), so a finding here is the finding
the inspector shows, with the same proof and the same words (``words.findings``), and the block's
recording replays in ``vmmtui replay``.

Why this process's own calls cause no finding: a finding is about memory that crossed processes
(an fd received or taken, a CUDA export imported) and is decided when the process holding it
exits; this process is alive at the end of the block, and the fds a test runner keeps (its
terminal, its capture files, its sockets) carry no memory. Memory still pinned at the end of the
block by a process that is still alive is what ``max_pinned_bytes`` weighs.
"""

from __future__ import annotations

import datetime
import os
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from vmmtui.model.findings import FindingKind, Weight
from vmmtui.model.policy import Problems, ProblemSeen, weigh
from vmmtui.pipeline.pinned import arrived, mapped
from vmmtui.stream.events import Event, FdOpened, Leak, MappingSeen, ProcessUnreadable
from vmmtui.stream.observed import LedgerFinding, TraceLost, TraceStarted

if TYPE_CHECKING:
    from vmmtui.pipeline.session import Source, TraceSession
    from vmmtui.record.recording import Recorder

#: the kind of the one finding the API adds itself: more bytes pinned at the end than allowed
OVER_BUDGET = str(FindingKind.PINNED_OVER_BUDGET)


class Mode(StrEnum):
    """How the block was observed."""

    #: the kernel's record of every call (eBPF): nothing between two looks is missed
    EBPF = "ebpf"
    #: ``/proc`` read every ``interval`` seconds: what lived between two polls may be missed, and
    #: CUDA calls are not seen (the driver's fds and kcmp are)
    POLLING = "polling"


class TraceError(RuntimeError):
    """The trace could not start or end; the message is one line with its cause and fix."""


@dataclass(frozen=True)
class Finding:
    """One verdict, as the inspector has it: ``kind`` (``model.findings.FindingKind``, or
    ``pinned-over-budget``), its ``weight`` (good news, a problem, a quiet fact), the process it is
    about, and its words: ``what``, the ``detail`` that proves or explains it, the ``fix``.
    ``event`` is the finding as data (a ``LedgerFinding``'s facts: peer, fd, handle, size,
    proof…); None for the budget."""

    kind: str
    weight: Weight
    pid: int
    what: str
    detail: str
    fix: str = ""
    proof: str = ""
    event: LedgerFinding | Leak | None = None
    #: a problem: the findings it folds (one relation: ``model.policy``), the pins they name,
    #: the peak of their bytes (summed over the pins), and how long it lasted (ns)
    findings: int = 1
    pins: int = 1
    bytes: int = 0
    held_ns: int = 0

    def __str__(self) -> str:
        from vmmtui.words.verdict import problem

        return problem(self)


@dataclass(frozen=True)
class Verdict:
    """What a traced block left: every finding, the problems among them (allowed kinds left out,
    the budget added), the bytes still pinned across processes at the end, how it was observed
    and what that could not see, and where its recording is."""

    mode: Mode
    #: why it polled ("" under eBPF; ``poll=True`` when asked)
    reason: str
    findings: tuple[Finding, ...]
    problems: tuple[Finding, ...]
    #: the problems of an allowed kind: not failures, still said
    allowed: tuple[Finding, ...]
    #: memory that crossed processes and is still pinned at the end by a live process, in bytes
    pinned_bytes: int
    max_pinned_bytes: int | None
    #: what this mode cannot see (polling: the calls between two polls, CUDA calls)
    unseen: tuple[str, ...] = ()
    #: the block's recording (``vmmtui replay PATH``), whole; None when not kept
    recording: Path | None = None
    #: records of the kernel lost (its ring buffer overflowed): what they could overturn is
    #: said as unknown, never as a leak
    lost_records: int = 0
    #: processes of the block that could not be read (pid, why): most often gone before the
    #: first look (a zombie left by earlier code, a worker that just exited); said, never a
    #: problem: nothing of theirs was seen to judge
    unread: tuple[tuple[int, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def report(self, per_kind: int | None = None) -> str:
        """The verdict in words (``words.verdict``): one line, then each problem with its detail
        and fix (at most ``per_kind`` of a kind, then how many more: the recording has them),
        the facts as counts, what polling cannot see, the records lost, the recording."""
        from vmmtui.words import verdict as said

        good = sum(1 for f in self.findings if f.weight is Weight.GOOD)
        lines = [
            said.head(
                self.mode,
                len(self.problems),
                good,
                len(self.allowed),
                self.pinned_bytes,
                self.max_pinned_bytes,
            ),
        ]
        shown: dict[str, int] = {}
        for f in self.problems:
            shown[f.kind] = shown.get(f.kind, 0) + 1
            if per_kind is None or shown[f.kind] <= per_kind:
                lines.append(said.problem(f))
        for kind, n in shown.items():
            if per_kind is not None and n > per_kind:
                lines.append(said.more_problems(kind, n - per_kind, self.recording))
        if facts := said.facts(self.findings):
            lines.append(facts)
        if self.mode is Mode.POLLING:
            lines.append(said.polling(self.reason, self.unseen))
        if self.lost_records:
            lines.append(said.lost(self.lost_records))
        if self.unread:
            lines.append(said.unread(self.unread))
        if self.recording is not None:
            lines.append(said.recording(self.recording))
        return "\n".join(lines)


@dataclass
class Tracing:
    """A traced block (``vmmtui.tracing``): a context manager; after the block, ``verdict`` and
    its parts (``findings``, ``problems``, ``report()``, ``recording``, ``mode``)."""

    allow: frozenset[str] = frozenset()
    max_pinned_bytes: int | None = None
    #: where the recording goes: a path, True (a temporary file, kept), False (none)
    record: str | Path | bool = True
    poll: bool = False
    #: polling: seconds between polls
    interval: float = 0.05
    cuda: bool = True
    libcuda: str | None = None
    nvml: bool = True
    title: str = ""
    verdict: Verdict | None = None
    _source: Source | None = field(default=None, repr=False)
    _session: TraceSession | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _recorder: Recorder | None = field(default=None, repr=False)
    _reason: str = ""
    _found: list[LedgerFinding | Leak] = field(default_factory=list, repr=False)
    _unread: list[ProcessUnreadable] = field(default_factory=list, repr=False)
    _lost: int = 0
    #: polling: memory fds seen arriving from another process (the ledger keeps them unnamed)
    _arrived: list[FdOpened] = field(default_factory=list, repr=False)
    #: polling: memory files seen mapped by a process they came to, by (pid, dev, ino)
    _mapped: dict[tuple[int, int, int], MappingSeen] = field(default_factory=dict, repr=False)
    _error: BaseException | None = field(default=None, repr=False)
    _started: threading.Event = field(default_factory=threading.Event, repr=False)
    final_path: Path | None = field(default=None, repr=False)

    # -- the block -----------------------------------------------------------------------------
    def __enter__(self) -> Tracing:
        from vmmtui.pipeline.session import TraceRequest, TraceSession
        from vmmtui.trace.loader import ProbeUnavailable
        from vmmtui.words import verdict as said

        request = TraceRequest(
            pids=(os.getpid(),),
            poll=self.poll,
            interval=self.interval,
            nvml=self.nvml,
            cuda=self.cuda,
            libcuda=self.libcuda,
            in_process=True,
        )
        self._recorder = self._open_recording()  # a path that cannot be written: before all
        try:
            source, reason = request.start()
        except (ProbeUnavailable, OSError) as exc:
            self._close_recording(keep=False)
            raise TraceError(said.not_started(exc)) from None
        if reason and (lack := _lacks_privileges()):
            reason = said.polled_because(lack)  # a test run's fix, not the trace command's
        self._source, self._reason = source, reason or ("asked (poll=True)" if self.poll else "")
        sinks = [self._keep] + ([self._recorder.write] if self._recorder is not None else [])
        self._session = TraceSession(source, sinks)
        self._thread = threading.Thread(target=self._run, name="vmmtui-tracing", daemon=True)
        self._thread.start()
        self._started.wait(10.0)  # the probe's first events are out: the block's calls follow
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self.verdict = self._finish()
        except TraceError:
            if exc is None:
                raise
            # the block's own exception goes on: a trace that failed too does not hide it

    # -- the verdict's parts -------------------------------------------------------------------
    def _done(self) -> Verdict:
        if self.verdict is None:
            raise TraceError("the verdict comes after the block: read it after the with")
        return self.verdict

    @property
    def mode(self) -> Mode:
        if self.verdict is not None:
            return self.verdict.mode
        from vmmtui.trace.polling import PollingTrace

        return Mode.POLLING if isinstance(self._source, PollingTrace) else Mode.EBPF

    @property
    def reason(self) -> str:
        return self._reason

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self._done().findings

    @property
    def problems(self) -> tuple[Finding, ...]:
        return self._done().problems

    @property
    def recording(self) -> Path | None:
        return self._done().recording

    def report(self) -> str:
        return self._done().report()

    # -- the machinery -------------------------------------------------------------------------
    def _keep(self, e: Event) -> None:
        if isinstance(e, TraceStarted):
            self._started.set()
        if isinstance(e, (LedgerFinding, Leak)):
            self._found.append(e)
        elif isinstance(e, ProcessUnreadable):
            self._unread.append(e)
        elif isinstance(e, TraceLost):
            self._lost += e.count
        elif arrived(e):
            self._arrived.append(e)  # type: ignore[arg-type]
        elif mapped(e):
            self._mapped[(e.pid, e.dev, e.ino)] = e  # type: ignore[attr-defined,assignment]

    def _run(self) -> None:
        assert self._session is not None
        try:
            for _ in self._session.events():
                pass
        except BaseException as exc:  # said at the end of the block, in the caller's thread
            self._error = exc
        finally:
            self._started.set()

    def _open_recording(self) -> Recorder | None:
        """The recording is written into a file with no name (``O_TMPFILE``) that is linked under
        its name at the end, whole: a kill -9 of the block's process leaves nothing behind, not a
        part nor an empty file named like it (``record.recording._Sink``). ``record=True``: a
        compressed one in the temporary directory, named by the pid and a random part."""
        if self.record is False:
            return None
        import secrets

        from vmmtui.record.recording import Header, Machine, Recorder

        if self.record is True:
            name = f"vmmtui-{os.getpid()}-{secrets.token_hex(4)}.jsonl.gz"
            path = Path(tempfile.gettempdir()) / name
        else:
            path = Path(self.record)
        header = Header(
            date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            machine=Machine.here(),
            backend="trace",
            reason="vmmtui.tracing",
            options={"command": [], "pids": [os.getpid()], "all": False},
            title=(self.title or f"traced block of pid {os.getpid()}")[:120],
        )
        self.final_path = path
        try:
            return Recorder(path, header, whole=True)
        except OSError as exc:
            from vmmtui.words.verdict import unwritable

            raise TraceError(unwritable(path, str(exc.strerror or exc))) from None

    def _finish(self) -> Verdict:
        source, session, thread = self._source, self._session, self._thread
        assert source is not None and session is not None and thread is not None
        source.stopping = True
        thread.join()
        source.close()
        recording = self._close_recording()
        if self._error is not None:
            from vmmtui.words.verdict import trace_failed

            raise TraceError(trace_failed(self._error, recording)) from self._error
        return self._verdict(session, recording)

    def _close_recording(self, keep: bool = True) -> Path | None:
        """The recording under its name (whole), or none (``keep`` False, or a write failed:
        what is at the name is never a part)."""
        r = self._recorder
        if r is None:
            return None
        r.close(keep=keep and self.final_path is not None)
        if r.failed or self.final_path is None or not keep:
            return None
        return self.final_path

    def _verdict(self, session: TraceSession, recording: Path | None) -> Verdict:
        from vmmtui.words.findings import words_of

        found: list[Finding] = []
        for e in self._found:
            said = words_of(e)
            proof = e.proof if isinstance(e, LedgerFinding) else ""
            found.append(
                Finding(
                    str(e.kind), weigh(e), e.pid or 0, said.what, said.detail, said.fix, proof, e
                )
            )
        pinned, pins = self._pinned(session)
        # one problem per relation (holder, exporter, what is wrong): its pins summed, its words
        # the first finding's, made whole (``words.verdict.one_problem``)
        folded = Problems().extend(e for e in self._found)
        each = [_problem(p) for p in folded]
        problems = [f for f in each if f.kind not in self.allow]
        allowed = [f for f in each if f.kind in self.allow]
        if self.max_pinned_bytes is not None and pinned > self.max_pinned_bytes:
            from vmmtui.words.verdict import over_budget

            w = over_budget(pinned, self.max_pinned_bytes, pins)
            over = Finding(OVER_BUDGET, Weight.PROBLEM, 0, w.what, w.detail, w.fix)
            found.append(over)
            (allowed if OVER_BUDGET in self.allow else problems).append(over)
        unseen: tuple[str, ...] = ()
        if self.mode is Mode.POLLING:
            from vmmtui.trace.polling import UNPROBED

            unseen = tuple(UNPROBED)
        return Verdict(
            self.mode,
            self._reason,
            tuple(found),
            tuple(problems),
            tuple(allowed),
            pinned,
            self.max_pinned_bytes,
            unseen,
            recording,
            self._lost,
            tuple((u.pid, u.reason) for u in self._unread),
        )

    def _pinned(self, session: TraceSession) -> tuple[int, list[str]]:
        """The bytes that crossed processes and are still pinned now, with what pins them, in
        words (``pipeline.pinned.pinned_now``: the one measure of the budget)."""
        from vmmtui.pipeline.pinned import pinned_now
        from vmmtui.words.verdict import pin_words

        total, pins = pinned_now(session.world, self._arrived, self._mapped)
        return total, [pin_words(p) for p in pins]


def _problem(p: ProblemSeen) -> Finding:
    """One problem as the verdict lists it: its first finding's words, with the pins, bytes and
    duration of every finding of its relation."""
    from vmmtui.words.findings import Said, words_of
    from vmmtui.words.verdict import one_problem

    e = p.first
    said = one_problem(words_of(p.newest), p)  # the newest figures (a growth that grew on)
    if Problems.over(p) and p.findings == 1:  # let go since: said in the past, as the inspector
        past = words_of(p.ended)
        said = Said(past.what, past.detail, said.fix)
    proof = e.proof if isinstance(e, LedgerFinding) else ""
    return Finding(
        str(e.kind), Weight.PROBLEM, e.pid or 0, said.what, said.detail, said.fix, proof, e,
        p.findings, len(p.pins), p.peak_bytes, p.held_ns,
    )  # fmt: skip


def _lacks_privileges() -> str | None:
    """What this process lacks for eBPF, where privileges are what it lacks (the facts alone)."""
    from vmmtui.trace.loader import privileged, why_not

    return None if privileged() else why_not(advice=False)


def tracing(
    *,
    allow: Iterable[str | FindingKind] = (),
    max_pinned_bytes: int | None = None,
    record: str | Path | bool = True,
    poll: bool = False,
    interval: float = 0.05,
    cuda: bool = True,
    libcuda: str | None = None,
    nvml: bool = True,
    title: str = "",
) -> Tracing:
    """Trace the ``with`` block and every process it starts; the verdict is read after it.

    ``allow``: finding kinds that are not problems here (still listed, in ``allowed``).
    ``max_pinned_bytes``: at most this many bytes that crossed processes may still be pinned
    when the block ends (over it: a ``pinned-over-budget`` problem). ``record``: the recording's
    path, True for a temporary file (its path in ``t.recording``), False for none. ``poll``:
    poll ``/proc`` even where eBPF is allowed (every ``interval`` seconds). ``cuda``/``libcuda``:
    probe the CUDA driver's sharing calls (eBPF), in the libcuda found or named. ``nvml``: ask
    NVML for the GPU memory of processes holding GPU fds (polling)."""
    return Tracing(
        allow=frozenset(str(k) for k in allow),
        max_pinned_bytes=max_pinned_bytes,
        record=record,
        poll=poll,
        interval=interval,
        cuda=cuda,
        libcuda=libcuda,
        nvml=nvml,
        title=title,
    )
