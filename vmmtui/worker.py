"""A worker process: one role (producer or consumer) running its steps on command.

``python -m vmmtui.worker --role producer --control-fd N ...`` is started by the session. It
answers each command on the control socket with a StepReport: the calls made, fds opened and
closed, addresses and handles, the seed's log lines, and a Failure when something went wrong.
Whatever happens, it releases what it holds before it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from vmmtui import channel
from vmmtui.backends import create as create_backend
from vmmtui.protocol import HeldFd, LineChannel, ProtocolError, StepReport
from vmmtui.sizes import align_up
from vmmtui.steps import CONSUMER, PRODUCER, role_steps
from vmmtui.troubleshooting import Failure, StepError, failure

PR_SET_PDEATHSIG = 1


@dataclass
class WorkerConfig:
    role: str
    backend: str
    size: int
    socket_path: str
    device: int = 0
    connect_timeout: float = 10.0
    accept_timeout: float = 10.0
    ack_timeout: float = 120.0
    scenario: str | None = None
    #: "STEP:HOW" (kill, segv, exit, raise): die at the start of STEP, for the crash tests
    crash: str | None = None


CRASHES = ("kill", "segv", "exit", "raise", "noise", "babble")


def _crash(how: str, control_fd: int | None) -> None:
    """Misbehave the way a buggy worker would; only reached through the hidden --crash option.

    ``noise`` writes junk to stdout and stderr and goes on (it must not disturb anything);
    ``babble`` writes a malformed line to the control channel and goes on; the rest die.
    """
    if how == "noise":
        os.write(1, b'{"type": "report", "fake": true}\n\x00\xff garbage on stdout\n')
        os.write(2, b"Traceback (most recent call last): not really, just noise on stderr\n")
        return
    if how == "babble" and control_fd is not None:
        os.write(control_fd, b"this is not JSON\n")
        return
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "segv":
        ctypes.string_at(0)
    elif how == "exit":
        os._exit(3)
    raise RuntimeError("injected crash (--crash)")


class Worker:
    """The state of one role between steps, and the steps themselves."""

    def __init__(self, config: WorkerConfig, control_fd: int | None = None):
        self.cfg = config
        self.role = config.role
        self.backend = create_backend(config.backend)
        self.steps = role_steps(self.role)
        self.done: list[str] = []
        self.held: dict[int, HeldFd] = {}
        self.state: dict[str, Any] = {"role": self.role, "pid": os.getpid(), "backend": config.backend,
                                      "requested_size": config.size, "socket_path": config.socket_path}
        self._opened: list[HeldFd] = []
        self._closed: list[int] = []
        self._log: list[str] = []
        self.sock: socket.socket | None = None
        self.listener: socket.socket | None = None
        self.handle: int | None = None
        self.va: int | None = None
        self.mapped = False
        self.control_fd = control_fd
        if control_fd is not None:
            self.hold(control_fd, "control", "control channel to the session (socketpair)", report=False)

    # -- fd bookkeeping: every fd we own is declared, so the inspector can check it --------------
    def hold(self, fd: int, kind: str, note: str = "", report: bool = True) -> None:
        held = HeldFd.of(fd, kind, note)
        self.held[fd] = held
        if report:
            self._opened.append(held)

    def close_fd(self, fd: int | None, call_note: str = "") -> None:
        if fd is None or fd not in self.held:
            return
        del self.held[fd]
        self.backend.calls.timed("close", {"fd": fd, **({"what": call_note} if call_note else {})},
                                 lambda: os.close(fd), lambda _: "0")
        self._closed.append(fd)

    def close_socket(self, attr: str) -> None:
        sock = getattr(self, attr)
        if sock is None:
            return
        fd = sock.fileno()
        self.held.pop(fd, None)
        self.backend.calls.timed("close", {"fd": fd, "what": attr}, sock.close, lambda _: "0")
        self._closed.append(fd)
        setattr(self, attr, None)

    # -- running steps ---------------------------------------------------------------------------
    def run_step(self, name: str, args: dict[str, Any] | None = None) -> StepReport:
        args = args or {}
        t0 = time.perf_counter_ns()
        ok, fail = True, None
        try:
            if name not in self.steps:
                raise StepError(failure("PROTOCOL", "control", f"{self.role} has no step {name!r}"))
            if name in self.done:
                raise StepError(failure("PROTOCOL", "control", f"step {name!r} already ran"))
            if name != "cleanup":
                expected = next(s for s in self.steps if s not in self.done)
                if name != expected:
                    raise StepError(failure("PROTOCOL", "control", f"step {name!r} out of order; next is {expected!r}"))
            if self.cfg.crash and self.cfg.crash.split(":")[0] == name:
                _crash(self.cfg.crash.split(":")[1], self.control_fd)
            getattr(self, f"_{self.role[0]}_{name}" if name != "cleanup" else "_cleanup")(**args)
            self.done.append(name)
        except StepError as exc:
            ok, fail = False, exc.failure
        except Exception as exc:  # a bug or an unexpected library error: report, never crash silently
            ok, fail = False, Failure("PYTHON", name, f"{type(exc).__name__}: {exc}", "unexpected error in the worker",
                                      "see the worker log; report it")
        if fail is not None:
            self._log.append(f"ERROR {fail.one_line()}")
        report = StepReport(self.role, name, ok, time.perf_counter_ns() - t0, self.backend.calls.take(),
                            self._log, self._opened, self._closed, list(self.held.values()), dict(self.state), fail)
        self._log, self._opened, self._closed = [], [], []
        return report

    def say(self, line: str) -> None:
        self._log.append(line)

    def _banner(self) -> None:
        kind = "CUDA VMM" if self.backend.name == "cuda" else "memfd (CPU memory, not GPU)"
        self.say(f"=== {kind} {self.role.capitalize()} ===")

    def _init(self) -> None:
        self._banner()
        info = self.backend.init(self.cfg.device)
        self.state.update(device=info.index, device_name=info.name, backend_label=info.label)
        what = "CUDA device" if self.backend.name == "cuda" else "memfd backend on"
        self.say(f"Using {what} {info.index}: {info.name}")

    @property
    def gpu_word(self) -> str:
        return "GPU" if self.backend.name == "cuda" else "the shared pages"

    # -- producer ----------------------------------------------------------------------------------
    def _p_init(self) -> None:
        self._init()

    def _p_query(self) -> None:
        info = self.backend.query()
        gran = info.granularity_min
        alloc = align_up(self.cfg.size, gran)
        self.state.update(vmm=info.vmm, posix_fd=info.posix_fd, granularity=gran,
                          granularity_recommended=info.granularity_rec, alloc_size=alloc, **info.extra)
        self.say(f"VMM support: {'yes' if info.vmm else 'no'}")
        self.say(f"Memory granularity: {gran} bytes (recommended {info.granularity_rec})")
        if self.cfg.scenario == "unaligned-size":
            alloc = self.cfg.size if self.cfg.size % gran else self.cfg.size + 1
            self.state["alloc_size"] = alloc
            self.say(f"SCENARIO unaligned-size: using {alloc} bytes as is, not rounded to {gran}")
        elif self.cfg.scenario == "out-of-memory":
            free, total = self.backend.free_memory() or (0, 0)
            alloc = align_up(free + (1 << 30), gran)
            self.state.update(alloc_size=alloc, device_free=free, device_total=total)
            self.say(f"SCENARIO out-of-memory: {free} bytes free of {total}; asking for {alloc}")
        else:
            self.say(f"Buffer size: {self.cfg.size} bytes, aligned size: {alloc} bytes")

    def _p_create(self) -> None:
        shareable = self.cfg.scenario != "no-fd-handle-type"
        if not shareable:
            self.say("SCENARIO no-fd-handle-type: creating without requestedHandleTypes = POSIX_FILE_DESCRIPTOR")
        self.handle = self.backend.create(self.state["alloc_size"], shareable=shareable)
        self.state["handle"] = self.handle
        fd = self.backend.handle_fd(self.handle)
        if fd is not None:
            self.hold(fd, "allocation", "the allocation itself (memfd)")
        self.say("Created physical memory allocation")

    def _reserve(self) -> None:
        self.va = self.backend.reserve(self.state["alloc_size"], self.state["granularity"])
        self.state.update(va=self.va, va_end=self.va + self.state["alloc_size"])
        self.say(f"Reserved virtual address space at 0x{self.va:x}")

    def _map(self) -> None:
        self.backend.map(self.va, self.state["alloc_size"], self.handle)
        self.mapped = True
        self.state["mapped_size"] = self.state["alloc_size"]

    def _set_access(self) -> None:
        self.backend.set_access(self.va, self.state["alloc_size"])
        self.state["access"] = "read/write"
        self.say("Set read/write access permissions")

    _p_reserve = _reserve
    _p_set_access = _set_access

    def _p_map(self) -> None:
        self._map()
        self.say("Mapped physical memory to virtual address")

    def _p_fill(self) -> None:
        count = self.backend.fill(self.va, self.state["alloc_size"])
        self.state["integers"] = count
        self.say(f"Generated {count} test integers")
        self.say("Copied test data to GPU" if self.backend.name == "cuda" else "Wrote test data into the shared pages")

    def _p_export(self) -> None:
        fd = self.backend.export_fd(self.handle)
        self.hold(fd, "exported", "exported allocation (cuMemExportToShareableHandle)" if self.backend.name == "cuda"
                  else "exported allocation (dup of the memfd)")
        self.state["exported_fd"] = fd
        self.say(f"Exported allocation as FD: {fd}")

    def _p_listen(self) -> None:
        path = self.cfg.socket_path
        found = self.backend.calls.timed("stale socket check", {"path": path},
                                         lambda: channel.remove_if_stale(path), lambda r: r or "no file")
        if found:
            self.say(f"Removed a {found.split(':', 1)[0]}: {found.split(': ', 1)[1]}")
            self.state["stale_socket"] = found
        self.listener = self.backend.calls.timed("socket+bind+listen", {"path": path, "type": "SOCK_SEQPACKET"},
                                                 lambda: channel.listen(path), lambda s: f"fd {s.fileno()}")
        self.hold(self.listener.fileno(), "listener", f"listening socket {path}")
        self.say("Waiting for consumer connection...")

    def _p_accept(self, expect_pid: int | None = None) -> None:
        refused: list[dict[str, int]] = []

        def on_refused(cred: channel.PeerCred) -> None:
            refused.append(asdict(cred))
            self.say(f"Refused connection from pid {cred.pid} uid {cred.uid}: not the consumer we launched")

        self.sock, cred = self.backend.calls.timed(
            "accept", {"fd": self.listener.fileno(), "expect_pid": expect_pid},
            lambda: channel.accept(self.listener, expect_pid, self.cfg.accept_timeout, on_refused),
            lambda r: f"fd {r[0].fileno()}, SO_PEERCRED pid={r[1].pid} uid={r[1].uid}")
        self.hold(self.sock.fileno(), "connection", f"connection to consumer pid {cred.pid}")
        self.state.update(peer_pid=cred.pid, peer_uid=cred.uid, refused=refused)
        self.say(f"Consumer connected (pid {cred.pid}, checked with SO_PEERCRED)")

    def _p_send(self) -> None:
        meta = {"type": "alloc", "requested_size": self.cfg.size, "alloc_size": self.state["alloc_size"],
                "granularity": self.state["granularity"], "device": self.state["device"],
                "device_name": self.state["device_name"], "backend": self.backend.name}
        fd = self.state["exported_fd"]
        self.backend.calls.timed("sendmsg", {"fd": self.sock.fileno(), "SCM_RIGHTS": [fd], "bytes": "metadata"},
                                 lambda: channel.send_message(self.sock, meta, [fd]), lambda n: f"{n} bytes")
        self.state["sent_metadata"] = meta
        self.say("Sent FD and size metadata to consumer")

    def _p_wait_ack(self) -> None:
        ack, _ = self.backend.calls.timed("recv", {"fd": self.sock.fileno(), "timeout_s": self.cfg.ack_timeout},
                                          lambda: channel.receive_message(self.sock, self.cfg.ack_timeout, "ack"),
                                          lambda r: "ack " + ("verified" if r[0].get("verified") else "FAILED"))
        self.state["ack"] = ack
        if not ack.get("verified"):
            raise StepError(failure("VERIFY_MISMATCH", "ack", f"consumer reports: {ack.get('detail', 'failed')}"))
        self.say("Consumer verified data successfully!")

    # -- consumer ----------------------------------------------------------------------------------
    def _c_init(self) -> None:
        self._init()

    def _c_connect(self, expect_pid: int | None = None) -> None:
        self.say("Connecting to producer...")
        path = self.cfg.socket_path
        retries: list[str] = []
        self.sock, tries = self.backend.calls.timed(
            "connect", {"path": path, "timeout_s": self.cfg.connect_timeout},
            lambda: channel.connect(path, self.cfg.connect_timeout, retries.append), lambda r: f"fd {r[0].fileno()} after {r[1]} tries")
        cred = channel.peer_cred(self.sock)
        if expect_pid is not None and cred.pid != expect_pid:
            self.sock.close()
            self.sock = None
            raise StepError(failure("PEER_REFUSED", "connect", f"peer pid {cred.pid} is not the producer {expect_pid}"))
        self.hold(self.sock.fileno(), "connection", f"connection to producer pid {cred.pid}")
        self.state.update(peer_pid=cred.pid, connect_tries=tries, connect_retries=retries)
        if retries:
            counts = ", ".join(f"{code} x{retries.count(code)}" for code in dict.fromkeys(retries))
            self.say(f"connect() failed {len(retries)} times ({counts}): the producer was not listening yet; retried")
        self.say("Connected to producer")

    def _c_receive(self) -> None:
        meta, fds = self.backend.calls.timed(
            "recvmsg", {"fd": self.sock.fileno(), "want": "1 fd (SCM_RIGHTS) + metadata"},
            lambda: channel.receive_message(self.sock, self.cfg.ack_timeout, "alloc", want_fds=1),
            lambda r: f"fds {r[1]}, {r[0].get('alloc_size')} bytes")
        fd = fds[0]
        self.hold(fd, "received", "received via SCM_RIGHTS")
        if meta.get("backend") != self.backend.name:
            raise StepError(failure("BAD_MESSAGE", "recvmsg", f"producer uses {meta.get('backend')}, we use {self.backend.name}"))
        self.state.update(received_fd=fd, alloc_size=int(meta["alloc_size"]), granularity=int(meta["granularity"]),
                          requested_size=int(meta["requested_size"]), metadata=meta)
        self.say(f"Received FD: {fd}, size: {meta['alloc_size']} bytes")

    def _c_import(self) -> None:
        self.handle = self.backend.import_fd(self.state["received_fd"])
        self.state["handle"] = self.handle
        fd = self.backend.handle_fd(self.handle)
        if fd is not None:
            self.hold(fd, "imported", "imported handle (dup of the received memfd)")
        self.say("Imported allocation handle from FD")

    _c_reserve = _reserve
    _c_set_access = _set_access

    def _c_map(self) -> None:
        self._map()
        self.say("Mapped imported memory to virtual address")

    def _c_verify(self) -> None:
        result = self.backend.verify(self.va, self.state["alloc_size"])
        self.state["verification"] = asdict(result) | {"passed": result.passed}
        if self.backend.name == "cuda":
            self.say(f"Copied {self.state['alloc_size']} bytes from GPU to host")
        else:
            self.say(f"Read {self.state['alloc_size']} bytes through the shared mapping")
        self.say(result.describe())
        if not result.passed:
            raise StepError(failure("VERIFY_MISMATCH", "verify", result.describe()))

    def _c_ack(self) -> None:
        v = self.state.get("verification", {})
        ack = {"type": "ack", "verified": bool(v.get("passed")), "checked": v.get("checked", 0),
               "detail": "verified" if v.get("passed") else "verification failed"}
        self.backend.calls.timed("send", {"fd": self.sock.fileno(), "message": "ack"},
                                 lambda: channel.send_message(self.sock, ack), lambda n: f"{n} bytes")
        self.say("Sent acknowledgment to producer")

    # -- both --------------------------------------------------------------------------------------
    def _cleanup(self) -> None:
        """Undo what was done, in reverse: unmap, free the range, release, close fds and sockets."""
        errors: list[StepError] = []

        def attempt(fn, *a) -> None:
            try:
                fn(*a)
            except StepError as exc:
                errors.append(exc)

        size = self.state.get("alloc_size", 0)
        wrong = None
        if self.cfg.scenario == "wrong-release" and self.role == CONSUMER and self.va is not None:
            self.say(f"SCENARIO wrong-release: freeing 0x{self.va:x} with the wrong call first")
            wrong = self.backend.wrong_release(self.va)
            self.state["wrong_release"] = wrong
            self.say(f"The wrong call returned {wrong}; now cleaning up the right way")
        if self.mapped:
            attempt(self.backend.unmap, self.va, size)
            self.mapped = False
        if self.va is not None:
            attempt(self.backend.free_range, self.va, size)
            self.va = None
        if self.handle is not None:
            hfd = self.backend.handle_fd(self.handle)
            attempt(self.backend.release, self.handle)
            if hfd is not None and hfd in self.held:
                del self.held[hfd]
                self._closed.append(hfd)
            self.handle = None
        for kind in ("exported", "received"):
            for fd in [h.fd for h in self.held.values() if h.kind == kind]:
                if self.cfg.scenario == "leaked-fd" and kind == "received":
                    self.say(f"SCENARIO leaked-fd: not closing the received fd {fd}")
                    continue
                self.close_fd(fd, kind)
        self.close_socket("sock")
        if self.listener is not None:
            self.close_socket("listener")
            with contextlib.suppress(FileNotFoundError):
                self.backend.calls.timed("unlink", {"path": self.cfg.socket_path},
                                         lambda: os.unlink(self.cfg.socket_path), lambda _: "0")
        attempt(self.backend.shutdown)
        self.state.update(handle=None, va=None, mapped_size=0, exported_fd=None, received_fd=None)
        if errors:
            raise errors[0]
        if wrong is not None and wrong not in ("CUDA_SUCCESS", "returned"):
            raise StepError(failure(wrong, "cuMemFree", "cuMemFree on imported VMM memory (scenario wrong-release); "
                                    "the right cleanup ran after it"))
        self.say("Cleanup complete")

    def release_all(self) -> None:
        """Last-chance cleanup at exit; errors are swallowed because the process is ending anyway."""
        if "cleanup" not in self.done:
            with contextlib.suppress(Exception):
                self._cleanup()


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _terminate(signum, frame) -> None:
    raise SystemExit(128 + signum)


def serve(worker: Worker, control: LineChannel) -> int:
    control.send({"type": "hello", "role": worker.role, "pid": os.getpid(), "steps": worker.steps,
                  "backend": worker.backend.name, "label": worker.backend.label,
                  "held": [asdict(h) for h in worker.held.values()]})
    while True:
        try:
            msg = control.receive()
        except ProtocolError as exc:
            control.send({"type": "error", "message": str(exc)})
            continue
        if msg is None or msg.get("cmd") == "quit":
            return 0
        cmd = msg.get("cmd")
        if cmd == "step":
            report = worker.run_step(str(msg.get("step")), msg.get("args") or {})
            control.send({"type": "report", "report": report.to_dict()})
        elif cmd == "run":
            for name in [s for s in worker.steps if s not in worker.done]:
                report = worker.run_step(name, (msg.get("args") or {}).get(name, {}))
                control.send({"type": "report", "report": report.to_dict()})
                if not report.ok:
                    break
        else:
            control.send({"type": "error", "message": f"unknown command {cmd!r}"})


def _settle_control_fd(fd: int) -> int:
    """Move the inherited control socket to the lowest free fd number.

    The number it arrives with is the session's own, which depends on how many fds the session
    process happens to hold; moved down, every worker's fd table reads the same on every machine."""
    low = os.dup(fd)
    if low < fd:
        os.close(fd)
        return low
    os.close(low)
    return fd


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vmmtui.worker", description="One vmmtui worker role.")
    p.add_argument("--role", choices=[PRODUCER, CONSUMER], required=True)
    p.add_argument("--backend", choices=["cuda", "memfd"], required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--control-fd", type=int, required=True)
    p.add_argument("--connect-timeout", type=float, default=10.0)
    p.add_argument("--accept-timeout", type=float, default=10.0)
    p.add_argument("--ack-timeout", type=float, default=120.0)
    p.add_argument("--scenario")
    p.add_argument("--crash", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGTERM, _terminate)
    control_fd = _settle_control_fd(a.control_fd)
    control = LineChannel(socket.socket(fileno=control_fd))
    cfg = WorkerConfig(a.role, a.backend, a.size, a.socket, a.device, a.connect_timeout, a.accept_timeout,
                       a.ack_timeout, a.scenario, a.crash)
    worker = Worker(cfg, control_fd=control_fd)
    try:
        return serve(worker, control)
    except (BrokenPipeError, ConnectionResetError):
        return 0
    finally:
        worker.release_all()
        with contextlib.suppress(OSError):
            control.send({"type": "bye"})


if __name__ == "__main__":
    sys.exit(main())
