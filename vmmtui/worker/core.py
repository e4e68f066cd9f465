"""One role's state between steps, and the table that dispatches each step to its body.

The session sends step names; ``STEPS`` maps (role kind, base step name) to the function that
runs it, so a step exists only where it is listed. After every step ``run_step`` returns a typed
``StepReport``: the calls made, the seed's log lines, fds opened and closed, every fd held, and
the ``WorkerState`` as it stands.
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
import time
from collections.abc import Callable
from typing import Any

from vmmtui.backends import LABELS, Backend, CallLog, DeviceInfo
from vmmtui.backends import create as create_backend
from vmmtui.plan.config import Mechanism, WorkerConfig
from vmmtui.plan.steps import (
    CONSUMER,
    PER_PEER,
    PRODUCER,
    base,
    build_plan,
    kind,
    peer_of,
    role_steps,
)
from vmmtui.stream.failures import Failure, StepError, failure
from vmmtui.stream.state import HeldKind, StepReport, WorkerState
from vmmtui.wire.protocol import StepArgs
from vmmtui.worker import consumer, crash, memory, producer, transport
from vmmtui.worker.fdbook import FdBook
from vmmtui.worker.sharing import LegacySharing, PoolSharing, Sharing, VmmSharing

StepBody = Callable[..., None]

#: what a scenario may ask of a worker (``WorkerConfig.flags``); the step bodies read them
FLAGS = frozenset(
    {
        "fabric-handle",
        "unrounded-size",
        "oversize",
        "without-fd-handle-type",
        "free-with-wrong-call",
        "keep-received-fd",
        "open-second-context",
        transport.SECCOMP_FLAG,
        transport.NO_PTRACER_FLAG,
        transport.PIDNS_FLAG,
        transport.UNPRIVILEGED_FLAG,
        memory.MEMORY_FLAG,
        "pool-without-handle-type",
    }
)

#: (role kind, step) -> its body; the producer's per-peer steps get ``peer=`` as well as the session's args
STEPS: dict[tuple[str, str], StepBody] = {
    (PRODUCER, "init"): memory.init,
    (PRODUCER, "query"): producer.query,
    (PRODUCER, "create"): producer.create,
    (PRODUCER, "reserve"): memory.reserve,
    (PRODUCER, "map"): producer.map_memory,
    (PRODUCER, "set_access"): memory.set_access,
    (PRODUCER, "fill"): producer.fill,
    (PRODUCER, "clear"): producer.clear,
    (PRODUCER, "export"): producer.export,
    (PRODUCER, "listen"): producer.listen,
    (PRODUCER, "accept"): producer.accept,
    (PRODUCER, "send"): producer.send,
    (PRODUCER, "wait_ack"): producer.wait_ack,
    (PRODUCER, "verify"): producer.verify,
    (PRODUCER, "cleanup"): memory.cleanup,
    (CONSUMER, "init"): memory.init,
    (CONSUMER, "connect"): consumer.connect,
    (CONSUMER, "receive"): consumer.receive,
    (CONSUMER, "import"): consumer.import_memory,
    (CONSUMER, "reserve"): memory.reserve,
    (CONSUMER, "map"): consumer.map_memory,
    (CONSUMER, "set_access"): memory.set_access,
    (CONSUMER, "verify"): consumer.verify,
    (CONSUMER, "write"): consumer.write,
    (CONSUMER, "ack"): consumer.ack,
    (CONSUMER, "cleanup"): memory.cleanup,
}


class Worker:
    """What one role holds between steps: the backend, the memory, the sockets, the fds, the state."""

    def __init__(self, config: WorkerConfig, control_fd: int | None = None):
        self.cfg = config
        self.role = config.role
        self.kind = kind(config.role)
        self.flags = frozenset(config.flags)
        if self.flags - FLAGS:
            raise ValueError(
                f"unknown worker flag(s) {', '.join(sorted(self.flags - FLAGS))}: "
                f"known are {', '.join(sorted(FLAGS))}"
            )
        if config.backend not in LABELS:
            raise ValueError(
                f"unknown backend {config.backend!r}: choose one of {', '.join(sorted(LABELS))}"
            )
        #: the calls made, kept from the start: the backend (numpy, cuda.bindings) is imported at init
        self.calls = CallLog()
        self._backend: Backend | None = None
        self.sharing: Sharing = {
            Mechanism.LEGACY.value: LegacySharing,
            Mechanism.POOL.value: PoolSharing,
        }.get(config.mechanism, VmmSharing)()
        self.steps = role_steps(
            self.role, build_plan(config.mechanism, config.consumers, config.direction)
        )
        self.done: list[str] = []
        self.book = FdBook(self.calls)
        self.state = WorkerState(
            self.role,
            os.getpid(),
            config.backend,
            config.mechanism,
            config.direction,
            config.size,
            config.socket_path,
            verify_on=config.verify,
        )
        self.control_fd = control_fd
        #: what init found about the device
        self.info: DeviceInfo | None = None
        # what cleanup must undo; ``state.mapping`` is what the report shows of it
        self.handle: int | None = None
        self.va: int | None = None
        self.mapped = False
        #: the consumer's connection to the producer
        self.sock: socket.socket | None = None
        self.listener: socket.socket | None = None
        #: the producer's connection to each consumer, by name
        self.peers: dict[str, socket.socket] = {}
        self._log: list[str] = []
        if control_fd is not None:
            self.book.hold(
                control_fd,
                HeldKind.CONTROL,
                "control channel to the session (socketpair)",
                report=False,
            )

    @property
    def backend(self) -> Backend:
        """Made on first use (the init step): the hello goes out before numpy and the driver's bindings load."""
        if self._backend is None:
            self._backend = create_backend(self.cfg.backend, self.calls)
        return self._backend

    @property
    def backend_loaded(self) -> bool:
        return self._backend is not None

    @property
    def backend_label(self) -> str:
        return LABELS[self.cfg.backend]

    # -- what earlier steps made (a step that needs it before it exists is out of order)
    @property
    def allocation(self) -> int:
        """The allocation handle that create or import made."""
        return _made(self.handle, "allocation handle")

    @property
    def address(self) -> int:
        """The virtual address that reserve (or the legacy allocation) made."""
        return _made(self.va, "virtual address")

    @property
    def received_fd(self) -> int:
        """The fd that receive took in."""
        return _made(self.state.received_fd, "received fd")

    def say(self, line: str) -> None:
        """One line of the seed's log, as the original demo prints it."""
        self._log.append(line)

    def gpu_ms(self, what: str) -> None:
        """Keep the last kernel's GPU time (CUDA events) under ``what`` for the bench and the card."""
        ms = self.backend.last_kernel_ms()
        if ms is not None:
            self.state.gpu_ms[what] = ms

    def _check_order(self, name: str) -> None:
        if name not in self.steps:
            raise StepError(failure("PROTOCOL", "control", f"{self.role} has no step {name!r}"))
        if name in self.done:
            raise StepError(failure("PROTOCOL", "control", f"step {name!r} already ran"))
        if name != "cleanup":
            expected = next(s for s in self.steps if s not in self.done)
            if name != expected:
                raise StepError(
                    failure(
                        "PROTOCOL", "control", f"step {name!r} out of order; next is {expected!r}"
                    )
                )

    def run_step(
        self, name: str, args: StepArgs | None = None, snapshot: bool = True
    ) -> StepReport:
        """Run step ``name``; its report. ``snapshot=False`` hands the live state instead of a copy:
        for a caller that encodes the report before the next step (the worker's serve loop), where
        the deepcopy would be wasted (50-130 us a step on the development VM)."""
        kwargs: dict[str, Any] = {}
        if args is not None and args.expect_pid is not None:
            kwargs["expect_pid"] = args.expect_pid
        t0 = time.perf_counter_ns()
        fail: Failure | None = None
        try:
            self._check_order(name)
            how = crash.due(self.cfg.crash, name)
            if how:
                crash.misbehave(how, self.control_fd)
            if self.kind == PRODUCER and base(name) in PER_PEER:
                kwargs["peer"] = peer_of(name)
            STEPS[(self.kind, base(name))](self, **kwargs)
            self.done.append(name)
        except StepError as exc:
            fail = exc.failure
        except (
            Exception
        ) as exc:  # a bug or an unexpected library error: report, never crash silently
            fail = Failure(
                "PYTHON",
                name,
                f"{type(exc).__name__}: {exc}",
                "unexpected error in the worker",
                "see the worker log; report it",
            )
        # the clock stops before the report is made: snapshotting the state for the inspector (a
        # deepcopy, 50-130 us a step on a loaded VM, as much as many steps' own work) is the
        # inspector's cost, counted in its overhead, not the sharing path's
        elapsed = time.perf_counter_ns() - t0
        if fail is not None:
            self._log.append(f"ERROR {fail.one_line()}")
        opened, closed = self.book.take()
        report = StepReport(
            self.role,
            name,
            fail is None,
            elapsed,
            copy.deepcopy(self.state) if snapshot else self.state,
            self.calls.take(),
            self._log,
            opened,
            closed,
            self.book.held(),
            fail,
        )
        self._log = []
        return report

    def release_all(self) -> None:
        """Last-chance cleanup at exit; errors are swallowed because the process is ending anyway."""
        if "cleanup" not in self.done and self.backend_loaded:  # no backend yet: nothing held
            with contextlib.suppress(Exception):
                memory.cleanup(self)


def _made(value: int | None, what: str) -> int:
    if value is None:
        raise StepError(
            failure("PROTOCOL", what, f"no {what} yet: the step that makes it has not run")
        )
    return value
