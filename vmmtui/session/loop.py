"""A Session launches a producer and its consumers and drives them through one step plan.

It owns the private socket directory, asks each worker for one step at a time, reads every fd
table from /proc after each step (fdchecks), runs the scenario's hooks around steps, and emits
typed events. ``close()`` always leaves nothing behind. No Textual here.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

from vmmtui import scenarios
from vmmtui.backends import Choice
from vmmtui.backends import choose as choose_backend
from vmmtui.plan.config import (
    Direction,
    Mechanism,
    SessionConfig,
    Transport,
    WorkerConfig,
    resolve_verify,
    validate,
)
from vmmtui.plan.steps import CONSUMER, PRODUCER, base, build_plan, consumer_names, kind, peer_of
from vmmtui.scenarios import VERIFIED, Scenario
from vmmtui.session import fdchecks
from vmmtui.session.kernel import KernelRecord
from vmmtui.session.processes import WorkerProcess, launch, read_hello
from vmmtui.session.stage import SessionStage
from vmmtui.session.tmpdir import (
    SOCKET_NAME,
    TmpdirError,
    choose_parent,
    make_private_dir,
    private_dir_name,
    sweep_stale_dirs,
)
from vmmtui.stream.events import (
    Event,
    KcmpVerdict,
    NextStep,
    Notice,
    NoticeCode,
    ScenarioInfo,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    StepStarted,
    WorkerStarted,
)
from vmmtui.stream.failures import Failure, failure
from vmmtui.stream.state import HeldKind, StepReport
from vmmtui.system.fdtable import FdTable
from vmmtui.system.interrupts import signals_held
from vmmtui.wire.protocol import StepArgs


class SessionError(Exception):
    """The session could not start; the message is one line for the user, of facts: where the
    failure of a call is the reason (``failure``), its cause and fix are worded where the line is
    shown (``words.troubleshooting.with_words``)."""

    def __init__(self, text: str, failure: Failure | None = None):
        super().__init__(text)
        self.failure = failure


class ConfigError(SessionError):
    """The user's input cannot run here (exit status 2)."""


class Session:
    """Drives every worker through the plan; every public method returns or yields events."""

    def __init__(
        self,
        config: SessionConfig | None = None,
        choice: Choice | None = None,
        scenario: Scenario | None = None,
    ):
        config = config or SessionConfig()
        self.scenario = scenario or scenarios.get(config.scenario)
        if (
            self.scenario
            and config.mechanism == Mechanism.VMM
            and self.scenario.mechanism != Mechanism.VMM
        ):
            config = replace(
                config, mechanism=self.scenario.mechanism
            )  # a legacy scenario implies legacy
        if self.scenario and self.scenario.transport != Transport.SCM_RIGHTS:
            config = replace(config, transport=self.scenario.transport)  # a pidfd scenario, pidfd
        self.config = config
        self.choice = choice
        self.consumers = consumer_names(config.consumers)
        self.roles = [PRODUCER, *self.consumers]
        self.plan: list[tuple[str, str]] = (
            self.scenario.plan()
            if self.scenario
            else build_plan(config.mechanism, config.consumers, config.direction)
        )
        self.devices = {PRODUCER: config.device} | {
            n: config.device_of(k) for k, n in enumerate(self.consumers)
        }
        self.workers: dict[str, WorkerProcess] = {}
        self._launching: list[WorkerProcess] = []
        self.stage: SessionStage | None = None
        self.verdicts: dict[
            str, bool
        ] = {}  # each verifier's verdict (consumers, or the producer when they write)
        self.kcmp: dict[str, KcmpVerdict] = {}
        self.outcome: ScenarioOutcome | None = None
        self.failure: Failure | None = None
        self.failed_at: tuple[str, str] | None = None
        self.position = 0
        self.verified = False
        self.integers = 0
        self.fd_checks = 0
        self.fd_problems = 0
        self.verify_on = "host"
        self.dir: str | None = None
        self._parent_dir: str | None = None
        self._dir_made = False
        self.started = False  # every worker said hello; steps are refused before that
        self.closed = False
        #: the SessionClosed that close() emitted (also when start() closed after a failure)
        self.closed_event: SessionClosed | None = None
        self._ended = False
        #: the kernel's record of the workers' calls (eBPF), where it runs and is wanted
        self.kernel = KernelRecord(config.kernel)
        self._lock = threading.RLock()  # one step or close at a time
        self._snap_lock = threading.Lock()

    # -- where we are ------------------------------------------------------------------------------
    @property
    def socket_path(self) -> str:
        return os.path.join(self.dir or "", SOCKET_NAME)

    @property
    def finished(self) -> bool:
        return self.position >= len(self.plan)

    @property
    def stopped(self) -> bool:
        return self.finished or self.failure is not None or self.closed

    @property
    def next_step(self) -> tuple[str, str] | None:
        return None if self.stopped else self.plan[self.position]

    def plan_step(self, index: int) -> tuple[str, str]:
        return self.plan[index]

    # -- starting ----------------------------------------------------------------------------------
    def start(self) -> list[Event]:
        """Choose the backend, check the configuration, make the private directory, launch the workers."""
        with self._lock:
            cfg = self.config
            if self.choice is None:
                self.choice = choose_backend(cfg.backend, cfg.device)
            if not self.choice.usable:
                raise ConfigError(self.choice.reason)
            problem = validate(
                cfg,
                self.choice.name,
                self.choice.devices,
                self.choice.capacity,
                self.scenario,
                self.choice.device_probe,
            )
            if problem:
                raise ConfigError(problem)
            self.verify_on, fallback = resolve_verify(
                cfg.verify, self.choice.name, self.choice.kernels_error
            )
            try:
                parent, moved = choose_parent(cfg.tmpdir)
            except TmpdirError as exc:
                raise ConfigError(str(exc)) from None
            events: list[Event] = [
                Notice(code=NoticeCode.STALE_DIR_REMOVED, facts={"path": str(p)})
                for p in sweep_stale_dirs(parent)
            ]
            events += [Notice(line) for line in (moved, fallback) if line]
            self.dir = private_dir_name(parent)  # made once the producer runs: see below
            self._parent_dir = parent
            self.stage = SessionStage(self.workers, self.socket_path)
            events.append(
                SessionStarted(
                    self.choice.name,
                    self.choice.reason,
                    "",
                    cfg.size,
                    self.dir,
                    self.socket_path,
                    list(self.plan),
                    cfg.mechanism,
                    list(self.consumers),
                    cfg.direction,
                    dict(self.devices),
                    self._scenario_info(),
                    transport=cfg.transport,
                )
            )
            if self.scenario:
                events.append(Notice(code=NoticeCode.SCENARIO, facts={"name": self.scenario.name}))
            self.kernel.start()  # loads in a thread, while the workers start
            try:
                launched = []
                for role in self.roles:  # start-ups overlap
                    launched.append((role, self._spawn(role)))
                    self.kernel.follow(launched[-1][1].pid, role)
                    if role == PRODUCER:
                        # only now, with the producer running: whenever this process is killed
                        # from here on, the producer's reaper removes the directory by its name
                        make_private_dir(self.dir)
                        self._dir_made = True
                for role, w in launched:
                    self._await_hello(role, w)
                    events.append(WorkerStarted(role, w.pid, self.choice.name))
            except TmpdirError as exc:
                self.close()
                raise ConfigError(str(exc)) from None
            except BaseException:
                self.close()
                raise
            self.started = True
            events += self.kernel.drain()
            events.append(self.where())
            return events

    def _scenario_info(self) -> ScenarioInfo | None:
        sc = self.scenario
        if sc is None:
            return None
        return ScenarioInfo(sc.name, sc.summary, sc.explanation, list(sc.expect), sc.at)

    def where(self) -> NextStep:
        """The plan's position as an event: what runs next, or nothing once stopped."""
        nxt = self.next_step
        return NextStep(self.position, *(nxt or ("", "")))

    def worker_config(self, role: str) -> WorkerConfig:
        cfg, sc, choice = self.config, self.scenario, self.choice
        assert choice is not None, "start() chose the backend first"
        crash = (
            cfg.crash.split(":", 1)[1] if cfg.crash and cfg.crash.split(":")[0] == role else None
        )
        return WorkerConfig(
            role,
            choice.name,
            cfg.size,
            self.socket_path,
            self.devices[role],
            cfg.connect_timeout,
            cfg.accept_timeout,
            sc.ack_timeout if sc and sc.ack_timeout else cfg.ack_timeout,
            self.verify_on,
            cfg.mechanism,
            cfg.consumers,
            cfg.direction,
            sc.flags_for(role) if sc else [],
            crash,
            session_pid=os.getpid(),
            transport=cfg.transport,
        )

    def _spawn(self, role: str) -> WorkerProcess:
        assert self._parent_dir is not None, "start() chose the directory's parent first"
        w = launch(self.worker_config(role), self._parent_dir)
        self._launching.append(w)  # so that close() stops it even if it never says hello
        return w

    def _await_hello(self, role: str, w: WorkerProcess) -> None:
        problem = read_hello(w, self.config.start_timeout)
        if problem:
            raise SessionError(
                f"{role} worker did not start: {problem.one_line()}; "
                f"log: {' | '.join(w.log_tail(3))}",
                problem,
            )
        self._launching.remove(w)
        self.workers[role] = w

    # -- stepping ----------------------------------------------------------------------------------
    def lifetime(self) -> list[Event]:
        """Start, run to the end (or the first failure) and close: every event of one session."""
        events: list[Event] = []
        try:
            events += self.start()
            events += list(self.run())
        finally:
            events += self.close()
        return events

    def run(self) -> Iterator[Event]:
        """Step to the end of the plan (or the first failure)."""
        while not self.stopped:
            yield from self.stepping()

    def step(self) -> list[Event]:
        """Run the next step of the plan; returns its events (empty once stopped)."""
        return list(self.stepping())

    def stepping(self) -> Iterator[Event]:
        """Run the next step of the plan, yielding each event as it happens: ``StepStarted`` comes
        before the worker is asked, so a view can show the step running; ``NextStep`` comes last.
        Nothing once the plan has stopped. Consume it to the end (the session is locked meanwhile)."""
        with self._lock:
            nxt = self.next_step
            if nxt is None or not self.started:
                return
            yield from self._step(*nxt)
            yield self.where()

    def _step(self, role: str, name: str) -> Iterator[Event]:
        index = self.position
        w = self.workers[role]
        if w.pending is not None:  # its background step answers before it takes a new one
            collected = self._collect(w, self.config.step_timeout)
            yield from collected
            if self.stopped:
                yield from self._ending()
                return
        peer = peer_of(name) if role == PRODUCER else role
        args = self._step_args(role, name, peer)
        # the first step waits for the probe if it is still loading: its calls are the lesson
        yield from self.kernel.drain(wait=True)
        yield from self._hooks("before", role, name)
        yield StepStarted(index, role, name)
        if self.scenario and (role, name) in self.scenario.background:
            yield from self._in_background(w, index, name, args)
            return
        before = FdTable.read(w.pid) if name == "receive" else None
        t0 = time.perf_counter_ns()
        w.pending = (index, name, t0)
        report = w.ask(name, args, self.config.step_timeout)
        w.pending = None
        if isinstance(report, Failure):
            yield from self._failed(w, name, report)
            return
        yield from self._record(w, index, report, time.perf_counter_ns() - t0)
        if before is not None and not before.error and report.ok:
            yield fdchecks.fd_delta(
                w,
                before,
                self.config.mechanism == Mechanism.LEGACY,
                taken=self.config.transport == Transport.PIDFD,
            )
        if report.ok:
            self.position += 1
            yield from self._hooks("after", role, name)
        if role == PRODUCER and base(name) == "accept" and self.workers[peer].pending is not None:
            yield from self._collect(self.workers[peer], self.config.connect_timeout + 5)
        yield from self._ending()

    def _step_args(self, role: str, name: str, peer: str) -> StepArgs:
        """What a step needs from the session: the pid the peer check must find."""
        if role == PRODUCER and base(name) == "accept":
            return StepArgs(expect_pid=self.workers[peer].pid)
        if kind(role) == CONSUMER and name == "connect":
            return StepArgs(expect_pid=self.workers[PRODUCER].pid)
        return StepArgs()

    def _hooks(self, when: str, role: str, name: str) -> list[Event]:
        if self.scenario is None:
            return []
        assert self.stage is not None, "start() made the stage: hooks run between steps"
        events: list[Event] = []
        for hook in self.scenario.hooks_at(when, role, name):
            events += hook.action.run(self.stage)
        return events

    def _in_background(
        self, w: WorkerProcess, index: int, name: str, args: StepArgs
    ) -> list[Event]:
        """Send the step and move on; its answer is collected before the worker's next step."""
        problem = w.send_step(name, args)
        if problem is not None:
            return self._failed(w, name, problem)
        w.pending = (index, name, time.perf_counter_ns())
        self.position += 1
        time.sleep(0.5)  # long enough for a few real refusals to show before the peer is ready
        return [Notice(code=NoticeCode.IN_BACKGROUND, facts={"role": w.role, "step": name})]

    def _collect(self, w: WorkerProcess, timeout: float) -> list[Event]:
        """The answer to a step sent earlier without waiting."""
        assert w.pending is not None, "collect follows a step sent without waiting"
        index, name, t0 = w.pending
        report = w.await_report(name, timeout)
        w.pending = None
        if isinstance(report, Failure):
            return self._failed(w, name, report)
        return self._record(w, index, report, time.perf_counter_ns() - t0)

    def _record(self, w: WorkerProcess, index: int, report: StepReport, rtt: int) -> list[Event]:
        """StepDone, the fd tables, and the leak check; a failed report stops the plan."""
        # the step's calls returned before its answer came: the kernel's record of them is whole
        events: list[Event] = self.kernel.drain()
        events.append(StepDone(index, report, rtt, max(0, rtt - report.duration_ns)))
        events += self.snapshot()
        if not report.ok:
            why = report.failure or failure(
                "PROTOCOL",
                f"{report.role} {report.step}",
                "the worker failed the step without saying why",
            )
            return events + self._stop_plan(report.role, report.step, why)
        if report.step == "cleanup":
            leak = fdchecks.leak_check(w, self._exporters(w))
            if leak is not None:
                events += self._stop_plan(report.role, report.step, leak)
        verification = report.state.verification
        if report.step == "verify" and verification is not None:
            self.verdicts[report.role] = verification.passed
            verifiers = (
                [PRODUCER] if self.config.direction == Direction.CONSUMER_WRITES else self.consumers
            )
            self.verified = all(self.verdicts.get(n) for n in verifiers)
            self.integers = verification.checked
        return events

    def _exporters(self, w: WorkerProcess) -> list[tuple[int, int]]:
        """(pid, fd) of the exported fds still open in other workers: the leak check compares with kcmp."""
        return [
            (o.pid, h.fd)
            for o in self.workers.values()
            if o is not w and o.alive
            for h in o.held
            if h.kind == HeldKind.EXPORTED
        ]

    def _stop_plan(self, role: str, step: str, problem: Failure) -> list[Event]:
        self.failure = problem
        self.failed_at = (role, step)
        return [SessionFailed(role, step, problem)]

    def _failed(self, w: WorkerProcess, name: str, problem: Failure) -> list[Event]:
        events = self.kernel.drain() + self._stop_plan(w.role, name, problem)
        exited = w.reap_if_dead()
        if exited is not None:
            events.append(exited)
        events += self.snapshot()
        return events + self._ending()

    def _ending(self) -> list[Event]:
        """SessionFinished and the scenario's outcome, once, when the plan has stopped."""
        if not (self.finished or self.failure is not None) or self._ended:
            return []
        self._ended = True
        events: list[Event] = []
        if self.failure is None:
            events.append(
                SessionFinished(
                    self.verified,
                    self.integers,
                    self.fd_checks,
                    self.fd_problems,
                    self.config.mechanism,
                    list(self.kcmp.values()),
                )
            )
        if self.scenario:
            outcome = (
                VERIFIED
                if self.failure is None and self.verified
                else (self.failure.code if self.failure else "not verified")
            )
            at = self.failed_at if self.failure else None
            self.outcome = ScenarioOutcome(
                self.scenario.name,
                outcome,
                " ".join(at) if at else "",
                list(self.scenario.expect),
                self.scenario.as_expected(outcome, at),
                self.scenario.explanation,
            )
            events.append(self.outcome)
        return events

    # -- what the kernel says ----------------------------------------------------------------------
    def snapshot(self, count: bool = True) -> list[Event]:
        """Every fd table from /proc, each declared fd checked, and kcmp on each exported/received pair.

        Safe to call from another thread while a step runs (the live 4 Hz refresh does); only the
        snapshots taken after steps (``count=True``) add to the session's check totals.
        """
        with self._snap_lock:
            snaps, verdicts = fdchecks.read_all(self.workers, self.roles, self.consumers)
            if count:
                self.fd_checks += sum(len([r for r in snap.rows if r.check]) for snap in snaps)
                self.fd_problems += sum(len(snap.problems) for snap in snaps)
            self.kcmp.update({v.consumer: v for v in verdicts})
            return [*snaps, *verdicts]

    def poll_exits(self) -> list[Event]:
        """WorkerExited for any worker that died since we last looked (between steps, say)."""
        if self.closed:
            return []
        return [e for w in list(self.workers.values()) if (e := w.reap_if_dead()) is not None]

    # -- shutting down -----------------------------------------------------------------------------
    def close(self) -> list[Event]:
        """Clean up what each live worker holds, stop and reap them all, remove the directory.

        SIGINT, SIGTERM and SIGHUP are held back meanwhile (in this thread), so that a second
        Ctrl-C cannot cut the cleanup in half; they are delivered once it is done.
        """
        with signals_held():
            return self._close()

    def _close(self) -> list[Event]:
        with self._lock:
            if self.closed:
                return []
            events: list[Event] = []
            was_going = self.started and not self.stopped
            for running in self.workers.values():
                running.stop_frozen()
            if self.stage is not None:
                self.stage.close()
            for role in [
                *self.consumers,
                PRODUCER,
            ]:  # consumers first: legacy handles close before cuMemFree
                w = self.workers.get(role)
                if w is not None and w.abandoned and w.alive:
                    step = w.pending[1] if w.pending else ""
                    facts: dict[str, str | int] = {"role": role, "step": step}
                    events.append(Notice(code=NoticeCode.INTERRUPTED, facts=facts))
                    continue
                if w is not None and w.pending is not None and w.alive:
                    events += self._collect(w, self.config.connect_timeout + 5)
                if w is None or not w.alive or "cleanup" in w.done:
                    continue
                report = w.ask("cleanup", StepArgs(), timeout=max(self.config.grace * 4, 10))
                events += self.kernel.drain()
                if isinstance(report, Failure):
                    events.append(
                        Notice(failure=report, code=NoticeCode.CLEANUP_FAILED, facts={"role": role})
                    )
                else:
                    events.append(StepDone(-1, report, 0, 0))
            # the directory goes while the producer still runs: killed from here on, this process
            # leaves nothing (the producer's reaper would remove the directory, but only once the
            # producer ends, which a normal quit below does before this process could)
            if self.dir and self._dir_made:
                shutil.rmtree(self.dir, ignore_errors=True)
            for w in [*self.workers.values(), *self._launching]:
                exited = w.stop(self.config.grace)
                if exited is not None:
                    events.append(exited)
            events += self.kernel.close()  # the workers' exits, and the probe detached
            self.closed = True
            if was_going:  # the plan stops here: nothing runs next
                events.append(self.where())
            leftovers = [
                f"{w.role} pid {w.pid} still running"
                for w in [*self.workers.values(), *self._launching]
                if w.proc.poll() is None
            ]
            if self.dir and self._dir_made and os.path.lexists(self.dir):
                leftovers.append(f"directory {self.dir} still exists")
            if self.kernel.on:
                leftovers.append("the eBPF probe on the workers is still attached")
            self.closed_event = SessionClosed(not leftovers, leftovers)
            events.append(self.closed_event)
            return events

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
