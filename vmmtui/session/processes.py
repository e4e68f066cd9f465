"""The session's side of each worker process: launch it, ask it to run a step, stop it.

Every wait has a deadline and every answer is checked: a worker that dies, stalls or talks
nonsense becomes a Failure with its exit code or signal, never a hang or a traceback.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from vmmtui.plan.config import WorkerConfig
from vmmtui.stream.events import WorkerExited
from vmmtui.stream.failures import Failure, failure
from vmmtui.stream.state import HeldFd, HeldKind, StepReport, WorkerState
from vmmtui.wire.protocol import (
    Bye,
    Hello,
    LineChannel,
    ProtocolError,
    Quit,
    Report,
    RunStep,
    StepArgs,
    WorkerError,
    command_message,
    decode_reply,
)

#: fd kinds that refer to the shared memory; each must be gone from /proc after its worker's cleanup
SHARED_KINDS = (HeldKind.ALLOCATION, HeldKind.EXPORTED, HeldKind.RECEIVED, HeldKind.IMPORTED)


def signal_name(returncode: int | None) -> str | None:
    if returncode is not None and returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return None


def worker_env() -> dict[str, str]:
    """The environment of a worker: ours, unbuffered, with this vmmtui first on the path."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@dataclass
class WorkerProcess:
    """One worker: its process, control channel, what it holds and what it has done."""

    role: str
    proc: subprocess.Popen
    control: LineChannel
    #: the worker's stdout and stderr: a file with no name, so a killed session leaves no log
    #: behind (and the producer's reaper finds the directory empty); read with pread
    log: BinaryIO
    held: list[HeldFd] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    state: WorkerState | None = None
    exited: WorkerExited | None = None
    #: every shared-memory fd it ever declared, for the leak check after cleanup
    shared: dict[int, HeldFd] = field(default_factory=dict)
    #: a step sent but not yet answered: (plan index, step, perf_counter_ns at send)
    pending: tuple[int, str, int] | None = None
    frozen: bool = False
    #: the session stopped waiting for an answer (an interrupt): the worker is busy with a step
    #: and will read nothing until it ends, so ``stop`` ends it with SIGTERM at once
    abandoned: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.exited is None and self.proc.poll() is None

    def log_tail(self, lines: int = 8, limit: int = 1 << 16) -> list[str]:
        try:
            fd = self.log.fileno()
            size = os.fstat(fd).st_size
            data = os.pread(fd, limit, max(0, size - limit))
        except (OSError, ValueError):
            return []
        return data.decode(errors="replace").splitlines()[-lines:]

    # -- talking -----------------------------------------------------------------------------------
    def receive(self, timeout: float) -> Hello | Report | Failure:
        """The worker's next message, or a Failure when it dies, stalls or talks nonsense."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return failure(
                    "WORKER_TIMEOUT", f"{self.role} worker", f"no answer within {timeout:g} s"
                )
            try:
                line = self.control.receive(timeout=min(left, 0.25))
                msg = None if line is None else decode_reply(line)
            except TimeoutError:
                if self.proc.poll() is not None:
                    return self.died()
                continue
            except ProtocolError as exc:
                return failure("PROTOCOL", f"{self.role} worker", str(exc))
            except OSError as exc:
                return failure("WORKER_DIED", f"{self.role} worker", str(exc))
            if msg is None or isinstance(msg, Bye):
                return self.died()
            if isinstance(msg, WorkerError):
                return failure("PROTOCOL", f"{self.role} worker", msg.message)
            return msg

    def died(self) -> Failure:
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            rc = None
        how = (
            f"killed by {signal_name(rc)}"
            if signal_name(rc)
            else (
                "still running but closed its control channel"
                if rc is None
                else f"exited with code {rc}"
            )
        )
        return failure("WORKER_DIED", f"{self.role} worker", f"pid {self.pid} {how}")

    def send_step(self, name: str, args: StepArgs) -> Failure | None:
        if not self.alive:
            return self.died()
        try:
            self.control.send(command_message(RunStep(name, args)))
        except OSError:
            return self.died()  # it died between our look and the send: name how
        return None

    def await_report(self, name: str, timeout: float) -> StepReport | Failure:
        """The report of step ``name``, or the Failure that stands for it (died, stalled, nonsense)."""
        try:
            msg = self.receive(timeout)
        except BaseException:  # Interrupted: nobody waits for this step any more
            self.abandoned = True
            raise
        if isinstance(msg, Failure):
            if msg.code == "WORKER_TIMEOUT":
                self.proc.kill()
            return msg
        if not isinstance(msg, Report):
            return failure(
                "PROTOCOL", f"{self.role} worker", f"expected a report, got {str(msg)[:80]}"
            )
        report = msg.report
        if (report.role, report.step) != (self.role, name):
            return failure(
                "PROTOCOL",
                f"{self.role} worker",
                f"expected the report of {self.role} {name}, got {report.role} {report.step}",
            )
        self.held, self.closed, self.state = report.held, report.closed, report.state
        self.shared.update({h.fd: h for h in report.held if h.kind in SHARED_KINDS})
        if report.ok:
            self.done.append(name)
        return report

    def ask(self, name: str, args: StepArgs, timeout: float) -> StepReport | Failure:
        problem = self.send_step(name, args)
        if problem is not None:
            return problem
        return self.await_report(name, timeout)

    # -- ending ------------------------------------------------------------------------------------
    def reap_if_dead(self) -> WorkerExited | None:
        """A WorkerExited the first time we find it dead (an expected end after cleanup is silent)."""
        if self.exited is not None or self.proc.poll() is None:
            return None
        if "cleanup" in self.done and self.proc.returncode == 0:
            return None
        rc = self.proc.returncode
        self.exited = WorkerExited(
            self.role, self.pid, rc, signal_name(rc), expected=False, log_tail=self.log_tail()
        )
        return self.exited

    def mark_killed(self, rc: int | None) -> WorkerExited:
        self.exited = WorkerExited(
            self.role, self.pid, rc, signal_name(rc), expected=True, log_tail=self.log_tail()
        )
        return self.exited

    def stop_frozen(self) -> None:
        """Resume a worker a scenario stopped: a stopped process can neither clean up nor quit."""
        if self.frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGCONT)
            self.frozen = False

    def stop(self, grace: float) -> WorkerExited | None:
        """Ask it to quit, then SIGTERM, then SIGKILL; always reaped. None if already reported."""
        self.stop_frozen()
        expected = self.alive
        if self.alive and self.abandoned:  # mid-step: SIGTERM ends the step, the worker releases
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            expected = self.proc.returncode == 128 + signal.SIGTERM  # its own way out of SIGTERM
        elif self.alive:
            with contextlib.suppress(OSError):
                self.control.send(command_message(Quit()))
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
                expected = False
        else:
            self.proc.wait()
        tail = [] if expected and self.proc.returncode == 0 else self.log_tail()
        self.control.close()
        self.log.close()
        if self.exited is not None:
            return None
        rc = self.proc.returncode
        self.exited = WorkerExited(
            self.role, self.pid, rc, signal_name(rc), expected and (rc == 0 or self.abandoned), tail
        )
        return self.exited


def launch(config: WorkerConfig, log_dir: str) -> WorkerProcess:
    """Start ``python -m vmmtui.worker`` with a control socketpair; its output goes to a file
    in ``log_dir`` that has no name (O_TMPFILE), so that a session killed at any moment leaves
    no log behind and the producer's reaper finds the session directory empty."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    log = tempfile.TemporaryFile(dir=log_dir, prefix=f"vmmtui-{config.role}-log-")  # noqa: SIM115 - closed by stop()
    try:
        config.control_fd = child.fileno()
        argv = [sys.executable, "-m", "vmmtui.worker", *config.to_argv()]
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            pass_fds=(child.fileno(),),
            env=worker_env(),
            close_fds=True,
            process_group=0,
        )  # a Ctrl-C at the terminal reaches only the session
    except BaseException:
        parent.close()
        log.close()
        raise
    finally:
        child.close()
    return WorkerProcess(config.role, proc, LineChannel(parent), log)


def read_hello(w: WorkerProcess, timeout: float) -> Failure | None:
    """Wait for the worker's hello; None when it arrived, else why the worker did not start."""
    hello = w.receive(timeout)
    if isinstance(hello, Failure):
        return hello
    if not isinstance(hello, Hello):
        return failure("BAD_MESSAGE", "hello", f"unexpected first message {str(hello)[:80]}")
    w.held = hello.held
    return None
