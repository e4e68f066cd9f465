"""A Session launches a producer and a consumer worker and drives them through one step plan.

It owns the private socket directory, talks to each worker over its control socketpair, reads
both fd tables from /proc after every step and checks them against what the workers say they
hold, and asks the kernel (kcmp) whether the exported and received fds are one open file.
``close()`` always leaves nothing behind. No Textual here: the CLI and the TUI consume the events.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from vmmtui import rogue
from vmmtui.backends import Choice
from vmmtui.backends import choose as choose_backend
from vmmtui.channel import AF_UNIX_PATH_MAX
from vmmtui.events import (
    Event,
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    StepStarted,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.fdtable import FdTable, kcmp_same_file
from vmmtui.protocol import HeldFd, LineChannel, ProtocolError, StepReport
from vmmtui.scenarios import VERIFIED, Scenario
from vmmtui.scenarios import get as get_scenario
from vmmtui.steps import (
    CONSUMER,
    DIRECTIONS,
    MECHANISMS,
    PRODUCER,
    base,
    build_plan,
    consumer_names,
    kind,
    peer_of,
)
from vmmtui.troubleshooting import Failure, failure

DIR_PREFIX = "vmmtui-"
SOCKET_NAME = "vmmtui.sock"


class SessionError(Exception):
    """The session could not start; the message is one line for the user."""


@dataclass
class SessionConfig:
    backend: str = "auto"
    size: int = 1 << 20
    device: int = 0
    connect_timeout: float = 10.0
    accept_timeout: float = 10.0
    ack_timeout: float = 120.0
    step_timeout: float = 600.0
    start_timeout: float = 60.0
    grace: float = 3.0
    tmpdir: str | None = None
    scenario: str | None = None
    #: auto (device kernels on cuda, numpy on memfd), host, device or both
    verify: str = "auto"
    #: vmm (cuMemCreate + fd) or legacy (cuMemAlloc + cuIpcGetMemHandle, seed 003)
    mechanism: str = "vmm"
    consumers: int = 1
    #: producer-writes (the seed) or consumer-writes (memMapIPCDrv: each consumer writes its slice)
    direction: str = "producer-writes"
    #: devices the consumers spread over, round-robin (None: the producer's device)
    devices: list[int] | None = None
    #: "ROLE:STEP:HOW" makes that worker die at the start of STEP (crash tests; HOW: kill, segv, exit, raise)
    crash: str | None = None

#: fd kinds that refer to the shared memory; each must be gone from /proc after its worker's cleanup
SHARED_KINDS = ("allocation", "exported", "received", "imported")


@dataclass
class WorkerProcess:
    """The session's side of one worker: its process, control channel and latest report."""

    role: str
    proc: subprocess.Popen
    control: LineChannel
    log_path: Path
    held: list[HeldFd] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    state: dict = field(default_factory=dict)
    exited: WorkerExited | None = None
    #: every shared-memory fd it ever declared, for the leak check after cleanup
    shared: dict[int, HeldFd] = field(default_factory=dict)
    #: a step sent but not yet answered (consumer-first runs connect in the background)
    pending: tuple[int, str, int] | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.exited is None and self.proc.poll() is None

    def log_tail(self, lines: int = 8) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []


def classify(target: str) -> str:
    """What an fd that no worker declared is, from its /proc target."""
    if target.startswith("/dev/nvidia"):
        return "driver"
    if target.startswith("socket:"):
        return "socket"
    if target.startswith("pipe:"):
        return "pipe"
    if target.startswith("anon_inode:"):
        return "anon"
    return "other"


def sweep_stale_dirs(tmpdir: str) -> list[str]:
    """Remove session directories left by runs whose process is dead (a stale socket file inside)."""
    removed = []
    try:
        names = os.listdir(tmpdir)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(DIR_PREFIX):
            continue
        parts = name[len(DIR_PREFIX):].split("-", 1)
        path = os.path.join(tmpdir, name)
        if not parts[0].isdigit() or int(parts[0]) == os.getpid():
            continue
        try:
            if os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(parts[0]), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:
            continue
    return removed


def resolve_verify(requested: str, backend: str) -> str:
    """Where the pattern is checked: ``auto`` means the device's kernels on cuda and numpy on memfd."""
    if requested == "auto":
        return "device" if backend == "cuda" else "host"
    if requested in ("device", "both") and backend != "cuda":
        raise SessionError(f"--verify {requested} needs a GPU; the {backend} backend checks on the CPU "
                           "(numpy on the mapped pages): use --verify host")
    if requested not in ("host", "device", "both"):
        raise SessionError(f"unknown --verify {requested!r}: choose auto, device, host or both")
    return requested


def _signal_name(returncode: int | None) -> str | None:
    if returncode is not None and returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return None


class Session:
    """Drives both workers through PLAN; every public method returns or yields events."""

    def __init__(self, config: SessionConfig | None = None, choice: Choice | None = None):
        self.config = config or SessionConfig()
        self.choice = choice
        self.scenario: Scenario | None = get_scenario(self.config.scenario)
        if self.scenario and self.scenario.mechanism != self.config.mechanism and self.config.mechanism == "vmm":
            self.config = replace(self.config, mechanism=self.scenario.mechanism)  # legacy scenarios imply it
        cfg = self.config
        self.consumers = consumer_names(cfg.consumers)
        self.roles = [PRODUCER, *self.consumers]
        self.plan: list[tuple[str, str]] = (self.scenario.plan() if self.scenario
                                            else build_plan(cfg.mechanism, cfg.consumers, cfg.direction))
        self.devices = {PRODUCER: cfg.device} | {
            n: (cfg.devices or [cfg.device])[k % len(cfg.devices or [cfg.device])] for k, n in enumerate(self.consumers)}
        #: each verifier's verdict (a consumer, or the producer when the consumers write)
        self.verdicts: dict[str, bool] = {}
        self.kcmp: dict[str, KcmpVerdict] = {}
        self.intruder: subprocess.Popen | None = None
        self.frozen: list[WorkerProcess] = []
        self.outcome: ScenarioOutcome | None = None
        self.failed_at: tuple[str, str] | None = None
        self._ended = False
        self.workers: dict[str, WorkerProcess] = {}
        self.position = 0
        self.failure: Failure | None = None
        self.verified = False
        self.integers = 0
        self.fd_checks = 0
        self.fd_problems = 0
        self.last_kcmp: KcmpVerdict | None = None
        self.dir: str | None = None
        self.closed = False
        self._launching: list[WorkerProcess] = []
        self.verify_on = "host"
        self.started = False  # both workers said hello; steps are refused before that
        self._lock = threading.RLock()  # one step or close at a time
        self._snap_lock = threading.Lock()

    # -- life cycle --------------------------------------------------------------------------------
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

    def start(self) -> list[Event]:
        """Choose the backend, make the private directory, launch both workers."""
        with self._lock:
            return self._start()

    def _start(self) -> list[Event]:
        cfg = self.config
        if self.choice is None:
            self.choice = choose_backend(cfg.backend, cfg.device)
        if not self.choice.usable:
            raise SessionError(self.choice.reason)
        problem = self.shape_problem()
        if problem:
            raise SessionError(problem)
        self.verify_on = resolve_verify(cfg.verify, self.choice.name)
        tmpdir = cfg.tmpdir or tempfile.gettempdir()
        events: list[Event] = [Notice(f"removed stale session directory {p}") for p in sweep_stale_dirs(tmpdir)]
        probe_path = os.path.join(tmpdir, f"{DIR_PREFIX}{os.getpid()}-xxxxxxxx", SOCKET_NAME)
        if len(os.fsencode(probe_path)) > AF_UNIX_PATH_MAX:
            raise SessionError(f"socket path {probe_path} is longer than AF_UNIX allows ({AF_UNIX_PATH_MAX} bytes): "
                               "set TMPDIR to a shorter directory")
        self.dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=tmpdir)
        os.chmod(self.dir, 0o700)
        events.append(SessionStarted(self.choice.name, self.choice.reason, "", cfg.size, self.dir, self.socket_path,
                                     list(self.plan), cfg.mechanism, list(self.consumers), cfg.direction,
                                     dict(self.devices)))
        if self.scenario:
            events.append(Notice(f"scenario {self.scenario.name}: {self.scenario.explanation}"))
        try:
            for role in self.roles:
                w = self._launch(role)
                events.append(WorkerStarted(role, w.pid, self.choice.name))
        except Exception:
            self.close()
            raise
        self.started = True
        return events

    def shape_problem(self) -> str | None:
        """Why this mechanism, number of consumers, direction and devices cannot run, or None."""
        cfg, backend = self.config, self.choice.name
        try:
            resolve_verify(cfg.verify, backend)
        except SessionError as exc:
            return str(exc)
        if self.scenario and self.scenario.why_not(backend):
            return f"scenario {self.scenario.name} cannot be shown on the {backend} backend: {self.scenario.why_not(backend)}"
        if cfg.mechanism not in MECHANISMS:
            return f"unknown mechanism {cfg.mechanism!r}: choose {' or '.join(MECHANISMS)}"
        if cfg.direction not in DIRECTIONS:
            return f"unknown direction {cfg.direction!r}: choose {' or '.join(DIRECTIONS)}"
        if not 1 <= cfg.consumers <= 8:
            return f"--consumers {cfg.consumers}: choose 1 to 8"
        if cfg.mechanism == "legacy" and backend != "cuda":
            return ("memfd has no legacy mode: cuIpcGetMemHandle/cuIpcOpenMemHandle are CUDA driver calls with no "
                    "CPU analogue; use --backend cuda, or --mechanism vmm on memfd")
        if cfg.devices and backend != "cuda":
            return "--devices needs the cuda backend (memfd has no devices)"
        if self.scenario and ((cfg.consumers, cfg.direction) != (1, "producer-writes")
                              or cfg.mechanism != self.scenario.mechanism):
            return (f"scenario {self.scenario.name} runs with the {self.scenario.mechanism} mechanism, one consumer "
                    "and the producer writing")
        if self.choice.devices is not None:
            bad = [d for d in self.devices.values() if d >= self.choice.devices]
            if bad:
                return f"device {bad[0]} does not exist (the driver sees {self.choice.devices}): fix --device/--devices"
        return None

    def _launch(self, role: str) -> WorkerProcess:
        cfg = self.config
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log_path = Path(self.dir) / f"{role}.log"
        ack_timeout = 3.0 if self.scenario and self.scenario.name == "consumer-hangs" else cfg.ack_timeout
        argv = [sys.executable, "-m", "vmmtui.worker", "--role", role, "--backend", self.choice.name,
                "--size", str(cfg.size), "--socket", self.socket_path, "--device", str(self.devices[role]),
                "--control-fd", str(child.fileno()), "--connect-timeout", str(cfg.connect_timeout),
                "--accept-timeout", str(cfg.accept_timeout), "--ack-timeout", str(ack_timeout),
                "--verify", self.verify_on, "--mechanism", cfg.mechanism, "--consumers", str(cfg.consumers),
                "--direction", cfg.direction]
        if self.scenario:
            argv += ["--scenario", self.scenario.name]
        if cfg.crash and cfg.crash.split(":")[0] == role:
            argv += ["--crash", cfg.crash.split(":", 1)[1]]
        env = self._env()
        try:
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        pass_fds=(child.fileno(),), env=env, close_fds=True)
        finally:
            child.close()
        w = WorkerProcess(role, proc, LineChannel(parent), log_path)
        self._launching.append(w)  # so that close() stops it even if it never says hello
        hello = self._receive(w, cfg.start_timeout)
        if not isinstance(hello, dict) or hello.get("type") != "hello":
            detail = hello.one_line() if isinstance(hello, Failure) else f"unexpected first message {hello!r}"
            raise SessionError(f"{role} worker did not start: {detail}; log: {' | '.join(w.log_tail(3))}")
        w.held = [HeldFd(**h) for h in hello.get("held", [])]
        self._launching.remove(w)
        self.workers[role] = w
        return w

    @staticmethod
    def _env() -> dict[str, str]:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        pkg_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        return env

    def _receive(self, w: WorkerProcess, timeout: float) -> dict | Failure:
        """The worker's next message, or a Failure when it dies, stalls or talks nonsense."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return failure("WORKER_TIMEOUT", f"{w.role} worker", f"no answer within {timeout:g} s")
            try:
                msg = w.control.receive(timeout=min(left, 0.25))
            except TimeoutError:
                if w.proc.poll() is not None:
                    return self._died(w)
                continue
            except ProtocolError as exc:
                return failure("PROTOCOL", f"{w.role} worker", str(exc))
            except OSError as exc:
                return failure("WORKER_DIED", f"{w.role} worker", str(exc))
            if msg is None:
                return self._died(w)
            if msg.get("type") == "error":
                return failure("PROTOCOL", f"{w.role} worker", str(msg.get("message")))
            return msg

    def _died(self, w: WorkerProcess) -> Failure:
        try:
            rc = w.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        how = f"killed by {_signal_name(rc)}" if _signal_name(rc) else f"exited with code {rc}"
        return failure("WORKER_DIED", f"{w.role} worker", f"pid {w.pid} {how}")

    # -- stepping ----------------------------------------------------------------------------------
    def step(self) -> list[Event]:
        """Run the next step of the plan; returns its events (empty once stopped)."""
        with self._lock:
            nxt = self.next_step
            if nxt is None or not self.started:
                return []
            role, name = nxt
            index = self.position
            w = self.workers[role]
            events: list[Event] = []
            if w.pending is not None:  # its background step answers before it takes a new one
                events += self._collect(w, self.config.step_timeout)
                if self.stopped:
                    return events + self._ending()
            args: dict = {}
            peer = peer_of(name) if role == PRODUCER else role
            if role == PRODUCER and base(name) == "accept":
                args["expect_pid"] = self.workers[peer].pid
            elif kind(role) == CONSUMER and name == "connect":
                args["expect_pid"] = self.workers[PRODUCER].pid
            events += self._before(role, name)
            events.append(StepStarted(index, role, name))
            if self.scenario and self.scenario.name == "consumer-first" and (role, name) == (CONSUMER, "connect"):
                problem = self._send(w, name, args)
                if problem is None:
                    w.pending = (index, name, time.perf_counter_ns())
                    self.position += 1
                    time.sleep(0.5)  # long enough for a few real refusals to show before the producer listens
                    events.append(Notice("consumer connect runs in the background: it retries until the producer "
                                         "listens (next steps)"))
                    return events
                return events + self._failed(w, name, problem)
            before = FdTable.read(w.pid) if name == "receive" else None
            t0 = time.perf_counter_ns()
            report, problem = self._ask(w, name, args, self.config.step_timeout)
            if problem is not None:
                return events + self._failed(w, name, problem)
            events += self._record(w, index, report, time.perf_counter_ns() - t0)
            if before is not None and not before.error and report.ok:
                events.append(self._fd_delta(w, before))
            if report.ok:
                self.position += 1
                events += self._after(role, name)
            if role == PRODUCER and base(name) == "accept" and self.workers[peer].pending is not None:
                events += self._collect(self.workers[peer], self.config.connect_timeout + 5)
            return events + self._ending()

    def _record(self, w: WorkerProcess, index: int, report: StepReport, rtt: int) -> list[Event]:
        """StepDone, the fd tables, and the leak check; a failed report stops the plan."""
        events: list[Event] = [StepDone(index, report, rtt, max(0, rtt - report.duration_ns))]
        events += self.snapshot()
        if not report.ok:
            self.failure = report.failure
            self.failed_at = (report.role, report.step)
            events.append(SessionFailed(report.role, report.step, report.failure))
            return events
        if report.step == "cleanup":
            leak = self._leak_check(w)
            if leak is not None:
                self.failure = leak
                self.failed_at = (report.role, report.step)
                events.append(SessionFailed(report.role, report.step, leak))
        if report.step == "verify":
            v = report.state.get("verification", {})
            self.verdicts[report.role] = bool(v.get("passed"))
            verifiers = [PRODUCER] if self.config.direction == "consumer-writes" else self.consumers
            self.verified = all(self.verdicts.get(n) for n in verifiers)
            self.integers = int(v.get("checked", 0))
        return events

    def _fd_delta(self, w: WorkerProcess, before: FdTable) -> Notice:
        """What receiving did to the consumer's fd table, as /proc shows it: the lesson of legacy vs VMM."""
        after = FdTable.read(w.pid)
        new = sorted(set(after.entries) - set(before.entries))
        if not new:
            return Notice(f"{w.role} fd table (from /proc): {len(before.entries)} fds before receive, "
                          f"{len(after.entries)} after: no fd arrived"
                          + (": the IPC handle is 64 plain bytes" if self.config.mechanism == "legacy" else ""))
        shown = ", ".join(f"fd {fd} → {after.entries[fd].target}" for fd in new)
        return Notice(f"{w.role} fd table (from /proc): {len(before.entries)} fds before receive, "
                      f"{len(after.entries)} after: {shown} arrived with SCM_RIGHTS")

    def _failed(self, w: WorkerProcess, name: str, problem: Failure) -> list[Event]:
        self.failure = problem
        self.failed_at = (w.role, name)
        events: list[Event] = [SessionFailed(w.role, name, problem)]
        events += self._reap_if_dead(w)
        events += self.snapshot()
        return events + self._ending()

    def _ending(self) -> list[Event]:
        """SessionFinished and the scenario's outcome, once, when the plan has stopped."""
        if not (self.finished or self.failure is not None) or self._ended:
            return []
        self._ended = True
        events: list[Event] = []
        if self.failure is None:
            events.append(self._finished())
        if self.scenario:
            outcome = VERIFIED if self.failure is None and self.verified else (
                self.failure.code if self.failure else "not verified")
            at = self.failed_at if self.failure else None
            self.outcome = ScenarioOutcome(self.scenario.name, outcome, " ".join(at) if at else "",
                                           list(self.scenario.expect), self.scenario.as_expected(outcome, at),
                                           self.scenario.explanation)
            events.append(self.outcome)
        return events

    def _collect(self, w: WorkerProcess, timeout: float) -> list[Event]:
        """The answer to a step sent earlier without waiting (consumer-first's connect)."""
        index, name, t0 = w.pending
        w.pending = None
        report, problem = self._await(w, name, timeout)
        if problem is not None:
            return self._failed(w, name, problem)
        return self._record(w, index, report, time.perf_counter_ns() - t0)

    # -- what scenarios do around the plan ---------------------------------------------------------
    def _before(self, role: str, name: str) -> list[Event]:
        sc = self.scenario.name if self.scenario else None
        if sc == "stale-socket" and (role, name) == (PRODUCER, "listen"):
            pid = rogue.plant_stale_socket(self.socket_path, self._env())
            there = os.path.exists(self.socket_path)
            return [Notice(f"scenario: pid {pid} bound {self.socket_path} and was SIGKILLed; the socket file "
                           f"{'is left behind' if there else 'did not stay (unexpected)'}")]
        return []

    def _after(self, role: str, name: str) -> list[Event]:
        sc = self.scenario.name if self.scenario else None
        step = (role, name)
        if sc == "intruder" and step == (PRODUCER, "listen"):
            self.intruder = rogue.start_intruder(self.socket_path, self._env())
            line = self._intruder_line(5.0)
            return [Notice(f"scenario: intruder pid {line.get('pid')} (uid {line.get('uid')}) connected to the "
                           "socket before the consumer" if line.get("event") == "connected"
                           else f"scenario: the intruder did not connect: {line}")]
        if sc == "intruder" and step == (PRODUCER, "accept") and self.intruder is not None:
            line = self._intruder_line(5.0)
            self._reap_intruder()
            return [Notice(f"scenario: the intruder received {line.get('fds_received', '?')} fd(s): "
                           f"{line.get('result', line)}")]
        if sc == "producer-dies" and step == (PRODUCER, "send"):
            return self._kill(self.workers[PRODUCER], signal.SIGKILL, "right after sending the fd")
        if sc == "consumer-dies" and step == (CONSUMER, "map"):
            return self._kill(self.workers[CONSUMER], signal.SIGKILL, "after mapping, before verifying")
        if sc == "consumer-hangs" and step == (CONSUMER, "map"):
            w = self.workers[CONSUMER]
            os.kill(w.pid, signal.SIGSTOP)
            self.frozen.append(w)
            return [Notice(f"scenario: consumer pid {w.pid} stopped with SIGSTOP: its socket stays open, "
                           "nothing will arrive")]
        return []

    def _kill(self, w: WorkerProcess, sig: int, when: str) -> list[Event]:
        os.kill(w.pid, sig)
        rc = w.proc.wait(timeout=10)
        w.exited = WorkerExited(w.role, w.pid, rc, _signal_name(rc), expected=True, log_tail=w.log_tail())
        return [Notice(f"scenario: {w.role} pid {w.pid} killed with {signal.Signals(sig).name} {when}"), w.exited]

    def _intruder_line(self, timeout: float) -> dict:
        out = self.intruder.stdout
        ready, _, _ = select.select([out], [], [], timeout)
        line = out.readline() if ready else ""
        try:
            return json.loads(line) if line else {"event": "no answer"}
        except ValueError:
            return {"event": "noise", "line": line[:80]}

    def _reap_intruder(self) -> None:
        if self.intruder is None:
            return
        if self.intruder.poll() is None:
            self.intruder.kill()
        self.intruder.wait()
        self.intruder.stdout.close()
        self.intruder = None

    def _leak_check(self, w: WorkerProcess) -> Failure | None:
        """After cleanup, ask /proc whether any shared-memory fd the worker declared is still open."""
        table = FdTable.read(w.pid)
        if table.error:
            return None
        leaks = [f"fd {fd} → {e.target}" for fd, h in sorted(w.shared.items())
                 if (e := table.entries.get(fd)) is not None and (e.dev, e.ino) == (h.dev, h.ino)]
        if not leaks:
            return None
        return failure("FD_LEAK", f"{w.role} cleanup", f"/proc/{w.pid}/fd still has {', '.join(leaks)} after cleanup")

    def _send(self, w: WorkerProcess, name: str, args: dict) -> Failure | None:
        if not w.alive:
            return failure("WORKER_DIED", f"{w.role} worker", f"pid {w.pid} is no longer running")
        try:
            w.control.send({"cmd": "step", "step": name, "args": args})
        except OSError as exc:
            return failure("WORKER_DIED", f"{w.role} worker", f"control channel closed: {exc}")
        return None

    def _ask(self, w: WorkerProcess, name: str, args: dict, timeout: float) -> tuple[StepReport | None, Failure | None]:
        problem = self._send(w, name, args)
        if problem is not None:
            return None, problem
        return self._await(w, name, timeout)

    def _await(self, w: WorkerProcess, name: str, timeout: float) -> tuple[StepReport | None, Failure | None]:
        msg = self._receive(w, timeout)
        if isinstance(msg, Failure):
            if msg.code == "WORKER_TIMEOUT":
                w.proc.kill()
            return None, msg
        if msg.get("type") != "report":
            return None, failure("PROTOCOL", f"{w.role} worker", f"expected a report, got {str(msg)[:80]}")
        try:
            report = StepReport.from_dict(msg["report"])
        except (ProtocolError, KeyError) as exc:
            return None, failure("PROTOCOL", f"{w.role} worker", str(exc))
        if (report.role, report.step) != (w.role, name):
            return None, failure("PROTOCOL", f"{w.role} worker",
                                 f"expected the report of {w.role} {name}, got {report.role} {report.step}")
        w.held, w.closed, w.state = report.held, report.closed, report.state
        w.shared.update({h.fd: h for h in report.held if h.kind in SHARED_KINDS})
        if report.ok:
            w.done.append(name)
        return report, None

    def _reap_if_dead(self, w: WorkerProcess) -> list[Event]:
        if w.exited is not None or w.proc.poll() is None:
            return []
        if "cleanup" in w.done and w.proc.returncode == 0:
            return []
        rc = w.proc.returncode
        w.exited = WorkerExited(w.role, w.pid, rc, _signal_name(rc), expected=False, log_tail=w.log_tail())
        return [w.exited]

    def _finished(self) -> SessionFinished:
        if self.config.mechanism == "legacy":
            kcmp = "no fd travelled (legacy IPC handle: 64 plain bytes), so there is nothing for kcmp to compare"
        elif len(self.kcmp) > 1:
            same = sum(1 for v in self.kcmp.values() if v.same)
            kcmp = f"{same}/{len(self.consumers)} consumers' fds are the producer's open file description"
        else:
            kcmp = self.last_kcmp.describe() if self.last_kcmp else "not checked"
        return SessionFinished(self.verified, self.integers, self.fd_checks, self.fd_problems, kcmp)

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
            yield from self.step()

    # -- what the kernel says ----------------------------------------------------------------------
    def snapshot(self, count: bool = True) -> list[Event]:
        """Both fd tables from /proc, each declared fd checked, and kcmp on the exported/received pair.

        Safe to call from another thread while a step runs (the live 4 Hz refresh does); only the
        snapshots taken after steps (``count=True``) add to the session's check totals.
        """
        with self._snap_lock:
            events: list[Event] = []
            for role in self.roles:
                w = self.workers.get(role)
                if w is not None:
                    events.append(self._fd_snapshot(w, count))
            for name in self.consumers:
                pair = self._kcmp(name)
                if pair is not None:
                    events.append(pair)
            return events

    def poll_exits(self) -> list[Event]:
        """WorkerExited for any worker that died since we last looked (between steps, say)."""
        if self.closed:
            return []
        events: list[Event] = []
        for w in list(self.workers.values()):
            events += self._reap_if_dead(w)
        return events

    def _fd_snapshot(self, w: WorkerProcess, count: bool = True) -> FdSnapshot:
        table = FdTable.read(w.pid)
        snap = FdSnapshot(w.role, w.pid, table.status, error=table.error)
        if table.error:
            return snap
        declared = {h.fd: h for h in w.held}
        for fd, entry in sorted(table.entries.items()):
            held = declared.get(fd)
            if held is None:
                snap.rows.append(FdRow(fd, entry.target, classify(entry.target)))
                continue
            same = entry.dev == held.dev and entry.ino == held.ino and entry.target == held.target
            detail = "" if same else f"worker says {held.target} (ino {held.ino}), kernel shows {entry.target} (ino {entry.ino})"
            snap.rows.append(FdRow(fd, entry.target, held.kind, held.note, "ok" if same else "mismatch", detail))
        for fd, held in sorted(declared.items()):
            if fd not in table.entries:
                snap.rows.append(FdRow(fd, held.target, held.kind, held.note, "missing",
                                       f"worker says it holds fd {fd} ({held.target}); /proc/{w.pid}/fd has no fd {fd}"))
        for fd in w.closed:
            entry = table.entries.get(fd)
            if entry is None:
                snap.closed.append(FdRow(fd, "", "closed", check="closed", detail="gone from /proc"))
            elif fd in declared:
                snap.closed.append(FdRow(fd, entry.target, "closed", check="reused",
                                         detail="the number was reused by a new fd the worker declared"))
            else:
                snap.closed.append(FdRow(fd, entry.target, "closed", check="reused",
                                         detail=f"the number now refers to {entry.target} (opened since)"))
        if count:
            self.fd_checks += len([r for r in snap.rows if r.check])
            self.fd_problems += len(snap.problems)
        return snap

    def _kcmp(self, consumer: str = CONSUMER) -> KcmpVerdict | None:
        p, c = self.workers.get(PRODUCER), self.workers.get(consumer)
        if not p or not c or not p.alive or not c.alive:
            return None
        pfd = next((h.fd for h in p.held if h.kind == "exported"), None)
        cfd = next((h.fd for h in c.held if h.kind == "received"), None)
        if pfd is None or cfd is None:
            return None
        r = kcmp_same_file(p.pid, pfd, c.pid, cfd)
        if r.same is None and "EBADF" in r.detail:
            return None  # one side closed its fd while we looked (a live refresh during cleanup): no pair now
        self.last_kcmp = self.kcmp[consumer] = KcmpVerdict(p.pid, pfd, c.pid, cfd, r.same, r.detail, consumer)
        return self.last_kcmp

    # -- shutting down -----------------------------------------------------------------------------
    def close(self) -> list[Event]:
        """Clean up what each live worker holds, stop and reap both, remove the directory."""
        with self._lock:
            if self.closed:
                return []
            events: list[Event] = []
            for w in self.frozen:  # a stopped worker cannot clean up or even die of SIGTERM
                with contextlib.suppress(ProcessLookupError):
                    os.kill(w.pid, signal.SIGCONT)
            self._reap_intruder()
            for role in [*self.consumers, PRODUCER]:  # consumers first: legacy handles close before cuMemFree
                w = self.workers.get(role)
                if w is not None and w.pending is not None and w.alive:
                    events += self._collect(w, self.config.connect_timeout + 5)
                if w is None or not w.alive or "cleanup" in w.done:
                    continue
                report, problem = self._ask(w, "cleanup", {}, timeout=max(self.config.grace * 4, 10))
                if report is not None:
                    events.append(StepDone(-1, report, 0, 0))
                if problem is not None:
                    events.append(Notice(f"{role} cleanup: {problem.one_line()}"))
            for w in [*self.workers.values(), *self._launching]:
                events += self._stop(w)
            self.closed = True
            leftovers = []
            for w in [*self.workers.values(), *self._launching]:
                if w.proc.poll() is None:
                    leftovers.append(f"{w.role} pid {w.pid} still running")
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
                if os.path.exists(self.dir):
                    leftovers.append(f"directory {self.dir} still exists")
            events.append(SessionClosed(not leftovers, leftovers))
            return events

    def _stop(self, w: WorkerProcess) -> list[Event]:
        expected = w.alive
        if w.alive:
            with contextlib.suppress(OSError):
                w.control.send({"cmd": "quit"})
            try:
                w.proc.wait(timeout=self.config.grace)
            except subprocess.TimeoutExpired:
                w.proc.terminate()
                try:
                    w.proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    w.proc.wait()
                expected = False
        else:
            w.proc.wait()
        w.control.close()
        if w.exited is not None:
            return []
        rc = w.proc.returncode
        w.exited = WorkerExited(w.role, w.pid, rc, _signal_name(rc), expected and rc == 0,
                                [] if expected and rc == 0 else w.log_tail())
        return [w.exited]

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
