"""A Session launches a producer and a consumer worker and drives them through one step plan.

It owns the private socket directory, talks to each worker over its control socketpair, reads
both fd tables from /proc after every step and checks them against what the workers say they
hold, and asks the kernel (kcmp) whether the exported and received fds are one open file.
``close()`` always leaves nothing behind. No Textual here: the CLI and the TUI consume the events.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vmmtui.backends import Choice
from vmmtui.backends import choose as choose_backend
from vmmtui.channel import AF_UNIX_PATH_MAX
from vmmtui.events import (
    Event,
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    Notice,
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
from vmmtui.steps import CONSUMER, PLAN, PRODUCER, ROLES
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
        self.started = False  # both workers said hello; steps are refused before that
        self._lock = threading.RLock()  # one step or close at a time
        self._snap_lock = threading.Lock()

    # -- life cycle --------------------------------------------------------------------------------
    @property
    def socket_path(self) -> str:
        return os.path.join(self.dir or "", SOCKET_NAME)

    @property
    def finished(self) -> bool:
        return self.position >= len(PLAN)

    @property
    def stopped(self) -> bool:
        return self.finished or self.failure is not None or self.closed

    @property
    def next_step(self) -> tuple[str, str] | None:
        return None if self.stopped else PLAN[self.position]

    @staticmethod
    def plan_step(index: int) -> tuple[str, str]:
        return PLAN[index]

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
        tmpdir = cfg.tmpdir or tempfile.gettempdir()
        events: list[Event] = [Notice(f"removed stale session directory {p}") for p in sweep_stale_dirs(tmpdir)]
        probe_path = os.path.join(tmpdir, f"{DIR_PREFIX}{os.getpid()}-xxxxxxxx", SOCKET_NAME)
        if len(os.fsencode(probe_path)) > AF_UNIX_PATH_MAX:
            raise SessionError(f"socket path {probe_path} is longer than AF_UNIX allows ({AF_UNIX_PATH_MAX} bytes): "
                               "set TMPDIR to a shorter directory")
        self.dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-", dir=tmpdir)
        os.chmod(self.dir, 0o700)
        events.append(SessionStarted(self.choice.name, self.choice.reason, "", cfg.size, self.dir, self.socket_path,
                                     list(PLAN)))
        try:
            for role in ROLES:
                w = self._launch(role)
                events.append(WorkerStarted(role, w.pid, self.choice.name))
        except Exception:
            self.close()
            raise
        self.started = True
        return events

    def _launch(self, role: str) -> WorkerProcess:
        cfg = self.config
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log_path = Path(self.dir) / f"{role}.log"
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        pkg_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        argv = [sys.executable, "-m", "vmmtui.worker", "--role", role, "--backend", self.choice.name,
                "--size", str(cfg.size), "--socket", self.socket_path, "--device", str(cfg.device),
                "--control-fd", str(child.fileno()), "--connect-timeout", str(cfg.connect_timeout),
                "--accept-timeout", str(cfg.accept_timeout), "--ack-timeout", str(cfg.ack_timeout)]
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
            args: dict = {}
            if (role, name) == (PRODUCER, "accept"):
                args["expect_pid"] = self.workers[CONSUMER].pid
            elif (role, name) == (CONSUMER, "connect"):
                args["expect_pid"] = self.workers[PRODUCER].pid
            events: list[Event] = [StepStarted(index, role, name)]
            t0 = time.perf_counter_ns()
            report, problem = self._ask(w, name, args, self.config.step_timeout)
            rtt = time.perf_counter_ns() - t0
            if problem is not None:
                self.failure = problem
                events.append(SessionFailed(role, name, problem))
                events += self._reap_if_dead(w)
                events += self.snapshot()
                return events
            events.append(StepDone(index, report, rtt, max(0, rtt - report.duration_ns)))
            events += self.snapshot()
            if not report.ok:
                self.failure = report.failure
                events.append(SessionFailed(role, name, report.failure))
                return events
            self.position += 1
            if (role, name) == (CONSUMER, "verify"):
                v = report.state.get("verification", {})
                self.verified = bool(v.get("passed"))
                self.integers = int(v.get("checked", 0))
            if self.finished:
                events.append(self._finished())
            return events

    def _ask(self, w: WorkerProcess, name: str, args: dict, timeout: float) -> tuple[StepReport | None, Failure | None]:
        if not w.alive:
            return None, failure("WORKER_DIED", f"{w.role} worker", f"pid {w.pid} is no longer running")
        try:
            w.control.send({"cmd": "step", "step": name, "args": args})
        except OSError as exc:
            return None, failure("WORKER_DIED", f"{w.role} worker", f"control channel closed: {exc}")
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
        w.held, w.closed, w.state = report.held, report.closed, report.state
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
        kcmp = self.last_kcmp.describe() if self.last_kcmp else "not checked"
        return SessionFinished(self.verified, self.integers, self.fd_checks, self.fd_problems, kcmp)

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
            for role in ROLES:
                w = self.workers.get(role)
                if w is not None:
                    events.append(self._fd_snapshot(w, count))
            pair = self._kcmp()
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

    def _kcmp(self) -> KcmpVerdict | None:
        p, c = self.workers.get(PRODUCER), self.workers.get(CONSUMER)
        if not p or not c or not p.alive or not c.alive:
            return None
        pfd = next((h.fd for h in p.held if h.kind == "exported"), None)
        cfd = next((h.fd for h in c.held if h.kind == "received"), None)
        if pfd is None or cfd is None:
            return None
        r = kcmp_same_file(p.pid, pfd, c.pid, cfd)
        if r.same is None and "EBADF" in r.detail:
            return None  # one side closed its fd while we looked (a live refresh during cleanup): no pair now
        self.last_kcmp = KcmpVerdict(p.pid, pfd, c.pid, cfd, r.same, r.detail)
        return self.last_kcmp

    # -- shutting down -----------------------------------------------------------------------------
    def close(self) -> list[Event]:
        """Clean up what each live worker holds, stop and reap both, remove the directory."""
        with self._lock:
            if self.closed:
                return []
            events: list[Event] = []
            for role in (CONSUMER, PRODUCER):
                w = self.workers.get(role)
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
