"""``python -m vmmtui.worker``: one worker process, driven by the session over its control socket.

It answers each command with a StepReport. It dies with its parent, even when stopped (the
parent-death signal is SIGKILL); an interrupt from the terminal is the session's to handle, so
SIGINT is ignored here; SIGTERM ends it through the last-chance release, which no second signal
can cut short. A producer forks its reaper first, so that its socket file and the session
directory go even when it is killed, or when the session died before this process ran (then the
worker exits at once and its reaper removes the directory by its known name).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

from vmmtui.plan.config import WorkerConfig
from vmmtui.plan.steps import CONSUMER, PRODUCER, kind
from vmmtui.system.lifeline import die_with_parent

if TYPE_CHECKING:
    from vmmtui.wire.protocol import LineChannel
    from vmmtui.worker.core import Worker


def settle_control_fd(fd: int) -> int:
    """Move the inherited control socket to the lowest free fd number.

    The number it arrives with is the session's own, which depends on how many fds the session
    process happens to hold; moved down, every worker's fd table reads the same on every machine."""
    low = os.dup(fd)
    if low < fd:
        os.close(fd)
        return low
    os.close(low)
    return fd


def serve(worker: Worker, control: LineChannel) -> int:
    """Say hello, then run what the session asks until it says quit or closes the channel."""
    from vmmtui.wire.protocol import (
        Hello,
        ProtocolError,
        Quit,
        Report,
        RunAll,
        RunStep,
        WorkerError,
        decode_command,
        reply_message,
    )

    # before the backend is imported (numpy, cuda.bindings: about 0.3 s); the init step loads it
    hello = Hello(
        worker.role,
        os.getpid(),
        worker.steps,
        worker.cfg.backend,
        worker.backend_label,
        worker.book.held(),
    )
    control.send(reply_message(hello))
    while True:
        try:
            msg = control.receive()
            command = None if msg is None else decode_command(msg)
        except ProtocolError as exc:
            control.send(reply_message(WorkerError(str(exc))))
            continue
        match command:
            case None | Quit():
                return 0
            case RunStep(step, args):
                # encoded at once, before the next step changes the state: no snapshot needed
                report = worker.run_step(step, args, snapshot=False)
                control.send(reply_message(Report(report)))
            case RunAll(args):
                for name in [s for s in worker.steps if s not in worker.done]:
                    report = worker.run_step(name, args.get(name), snapshot=False)
                    control.send(reply_message(Report(report)))
                    if not report.ok:
                        break


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    cfg = WorkerConfig.from_argv(argv)
    if kind(cfg.role) not in (PRODUCER, CONSUMER):
        print(f"python -m vmmtui.worker: unknown role {cfg.role!r}", file=sys.stderr)
        return 2
    if cfg.control_fd is None:
        print("python -m vmmtui.worker: --control-fd is required", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    session_pid = cfg.session_pid or os.getppid()
    if kind(cfg.role) == PRODUCER:
        from vmmtui.worker import reaper

        # before numpy or a driver starts any thread, and before the parent check: from here on
        # the session directory goes with the session, whenever the session dies
        reaper.start(cfg.socket_path, session_pid)
    if not die_with_parent(session_pid):
        return 1
    signal.signal(signal.SIGTERM, _terminate)
    control_fd = settle_control_fd(cfg.control_fd)

    from vmmtui.system.interrupts import signals_held
    from vmmtui.wire.protocol import Bye, LineChannel, reply_message
    from vmmtui.worker.core import Worker

    control = LineChannel(socket.socket(fileno=control_fd))
    try:
        worker = Worker(cfg, control_fd=control_fd)
    except ValueError as exc:
        print(f"python -m vmmtui.worker: {exc}", file=sys.stderr)
        return 2
    try:
        return serve(worker, control)
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        with signals_held():
            worker.release_all()
            with contextlib.suppress(OSError):
                control.send(reply_message(Bye()))


if __name__ == "__main__":
    sys.exit(main())
