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
from vmmtui.steps import (
    CONSUMER,
    DIRECTIONS,
    MECHANISMS,
    PER_PEER,
    PRODUCER,
    base,
    build_plan,
    kind,
    peer_of,
    role_steps,
)
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
    #: where the pattern is written and checked: host (the seed's copy + numpy), device (kernels), both
    verify: str = "host"
    #: vmm (cuMemCreate + an fd) or legacy (cuMemAlloc + a 64-byte cuIpcGetMemHandle handle)
    mechanism: str = "vmm"
    consumers: int = 1
    direction: str = "producer-writes"
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
        self.kind = kind(config.role)
        self.backend = create_backend(config.backend)
        self.legacy = config.mechanism == "legacy"
        self.steps = role_steps(self.role, build_plan(config.mechanism, config.consumers, config.direction))
        #: the producer's connection to each consumer, by name
        self.peers: dict[str, socket.socket] = {}
        self.done: list[str] = []
        self.held: dict[int, HeldFd] = {}
        self.state: dict[str, Any] = {"role": self.role, "pid": os.getpid(), "backend": config.backend,
                                      "requested_size": config.size, "socket_path": config.socket_path,
                                      "mechanism": config.mechanism, "direction": config.direction}
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
        if sock is not None:
            self._close_sock(sock, attr)
            setattr(self, attr, None)

    def _close_sock(self, sock: socket.socket, what: str) -> None:
        fd = sock.fileno()
        self.held.pop(fd, None)
        self.backend.calls.timed("close", {"fd": fd, "what": what}, sock.close, lambda _: "0")
        self._closed.append(fd)

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
            if self.cfg.crash and self.cfg.crash.rsplit(":", 1)[0] == name:
                _crash(self.cfg.crash.rsplit(":", 1)[1], self.control_fd)
            if base(name) in PER_PEER and self.kind == PRODUCER:
                args = {**args, "peer": peer_of(name)}
            getattr(self, f"_{self.kind[0]}_{base(name)}" if name != "cleanup" else "_cleanup")(**args)
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
        what = "memfd (CPU memory, not GPU)" if self.backend.name != "cuda" else (
            "CUDA legacy IPC" if self.legacy else "CUDA VMM")
        self.say(f"=== {what} {self.role.capitalize()} ===")

    def _init(self) -> None:
        self._banner()
        info = self.backend.init(self.cfg.device)
        self.state.update(device=info.index, device_name=info.name, backend_label=info.label)
        what = "CUDA device" if self.backend.name == "cuda" else "memfd backend on"
        self.say(f"Using {what} {info.index}: {info.name}")
        if self.cfg.verify != "host":  # the only case in which a kernel fills, writes or checks
            self.backend.load_kernels()
            src = getattr(self.backend.kernels, "source", "")
            self.say("Loaded the fill/verify kernels (" + ("compiled by NVRTC" if src == "nvrtc" else "NVRTC cubin from the cache") + ")")
        self.state["verify_on"] = self.cfg.verify

    @property
    def gpu_word(self) -> str:
        return "GPU" if self.backend.name == "cuda" else "the shared pages"

    # -- producer ----------------------------------------------------------------------------------
    def _p_init(self) -> None:
        self._init()

    def _p_query(self) -> None:
        if self.legacy:
            return self._p_query_legacy()
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

    def _p_query_legacy(self) -> None:
        info = self.backend.info
        unified = self.backend._attr("CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING")
        alloc = align_up(self.cfg.size, 4)
        self.state.update(unified_addressing=bool(unified), granularity=4, alloc_size=alloc, **info.extra)
        if not unified:
            raise StepError(failure("CUDA_ERROR_NOT_SUPPORTED", "cuDeviceGetAttribute",
                                    "UNIFIED_ADDRESSING = 0: legacy IPC needs it"))
        self.say("Legacy IPC: cuMemAlloc + cuIpcGetMemHandle (no VMM, no granularity, no fd)")
        self.say(f"Buffer size: {alloc} bytes")

    def _p_create(self) -> None:
        if self.legacy:
            self.va = self.handle = self.backend.alloc(self.state["alloc_size"])
            self.state.update(handle=None, va=self.va, va_end=self.va + self.state["alloc_size"],
                              mapped_size=self.state["alloc_size"], access="read/write")
            self.say(f"Allocated {self.state['alloc_size']} bytes with cuMemAlloc at 0x{self.va:x}")
            return
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

    def _p_clear(self) -> None:
        self.backend.clear(self.va, self.state["alloc_size"])
        self.state["integers"] = self.state["alloc_size"] // 4
        self.say(f"Cleared {self.state['alloc_size']} bytes: the consumers will write the pattern")

    def _p_verify(self) -> None:
        self._verify("Checked what the consumers wrote")

    def _p_fill(self) -> None:
        on = "host" if self.cfg.verify == "host" else "device"
        count = self.backend.fill(self.va, self.state["alloc_size"], on)
        self.state.update(integers=count, fill_on=on, **(self._gpu_ms("fill") if on == "device" else {}))
        if on == "device":
            self.say(f"Wrote {count} test integers on the GPU (fill_pattern kernel)")
        else:
            self.say(f"Generated {count} test integers")
            self.say("Copied test data to GPU" if self.backend.name == "cuda" else "Wrote test data into the shared pages")

    def _p_export(self) -> None:
        if self.legacy:
            handle = self.backend.ipc_export(self.va)
            self.state["ipc_handle"] = handle.hex()
            self.say(f"Got the IPC handle (64 bytes, no fd): {handle[:16].hex()}…")
            return
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

    def _p_accept(self, expect_pid: int | None = None, peer: str = CONSUMER) -> None:
        refused: list[dict[str, int]] = []

        def on_refused(cred: channel.PeerCred) -> None:
            refused.append(asdict(cred))
            self.say(f"Refused connection from pid {cred.pid} uid {cred.uid}: not the consumer we launched")

        conn, cred = self.backend.calls.timed(
            "accept", {"fd": self.listener.fileno(), "expect_pid": expect_pid},
            lambda: channel.accept(self.listener, expect_pid, self.cfg.accept_timeout, on_refused),
            lambda r: f"fd {r[0].fileno()}, SO_PEERCRED pid={r[1].pid} uid={r[1].uid}")
        self.peers[peer] = conn
        self.hold(conn.fileno(), "connection", f"connection to {peer} pid {cred.pid}")
        self.state.update(peer_pid=cred.pid, peer_uid=cred.uid, refused=refused)
        self.state.setdefault("peers", {})[peer] = {"pid": cred.pid, "uid": cred.uid, "fd": conn.fileno()}
        self.say(f"{peer.capitalize()} connected (pid {cred.pid}, checked with SO_PEERCRED)")

    def _p_send(self, peer: str = CONSUMER) -> None:
        meta = {"type": "alloc", "requested_size": self.cfg.size, "alloc_size": self.state["alloc_size"],
                "granularity": self.state["granularity"], "device": self.state["device"],
                "device_name": self.state["device_name"], "backend": self.backend.name,
                "mechanism": self.cfg.mechanism}
        sock = self.peers[peer]
        if self.legacy:
            meta["ipc_handle"] = self.state["ipc_handle"]
            self.backend.calls.timed("sendmsg", {"fd": sock.fileno(), "SCM_RIGHTS": "none", "bytes": "metadata + 64-byte handle"},
                                     lambda: channel.send_message(sock, meta), lambda n: f"{n} bytes")
            self.say(f"Sent the 64-byte IPC handle and size to {peer} (no fd)")
        else:
            fd = self.state["exported_fd"]
            self.backend.calls.timed("sendmsg", {"fd": sock.fileno(), "SCM_RIGHTS": [fd], "bytes": "metadata"},
                                     lambda: channel.send_message(sock, meta, [fd]), lambda n: f"{n} bytes")
            self.say("Sent FD and size metadata to " + peer)
        self.state["sent_metadata"] = meta

    def _p_wait_ack(self, peer: str = CONSUMER) -> None:
        sock = self.peers[peer]
        ack, _ = self.backend.calls.timed("recv", {"fd": sock.fileno(), "timeout_s": self.cfg.ack_timeout},
                                          lambda: channel.receive_message(sock, self.cfg.ack_timeout, "ack"),
                                          lambda r: "ack " + ("verified" if r[0].get("verified") else "FAILED"))
        self.state["ack"] = ack
        self.state.setdefault("acks", {})[peer] = ack
        if not ack.get("verified"):
            raise StepError(failure("VERIFY_MISMATCH", "ack", f"{peer} reports: {ack.get('detail', 'failed')}"))
        if self.cfg.direction == "consumer-writes":
            start, end = ack.get("slice") or ("?", "?")
            self.say(f"{peer.capitalize()} wrote its slice [{start}, {end}) and its stream finished")
        else:
            self.say(f"{peer.capitalize()} verified data successfully!")

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
        want = 0 if self.legacy else 1
        meta, fds = self.backend.calls.timed(
            "recvmsg", {"fd": self.sock.fileno(), "want": "metadata + 64-byte handle, no fd" if self.legacy
                        else "1 fd (SCM_RIGHTS) + metadata"},
            lambda: channel.receive_message(self.sock, self.cfg.ack_timeout, "alloc", want_fds=want),
            lambda r: f"fds {r[1]}, {r[0].get('alloc_size')} bytes")
        for fd in fds:
            self.hold(fd, "received", "received via SCM_RIGHTS")
        if meta.get("backend") != self.backend.name or meta.get("mechanism", "vmm") != self.cfg.mechanism:
            for fd in fds:
                self.close_fd(fd)
            raise StepError(failure("BAD_MESSAGE", "recvmsg", f"producer uses {meta.get('backend')} "
                                    f"{meta.get('mechanism', 'vmm')}, we use {self.backend.name} {self.cfg.mechanism}"))
        self.state.update(received_fd=fds[0] if fds else None, alloc_size=int(meta["alloc_size"]),
                          granularity=int(meta["granularity"]), requested_size=int(meta["requested_size"]),
                          metadata=meta, owner_device=int(meta.get("device", 0)))
        if self.legacy:
            self.state["ipc_handle"] = meta["ipc_handle"]
            self.say(f"Received IPC handle {meta['ipc_handle'][:32]}… (64 bytes, no fd), size: {meta['alloc_size']} bytes")
        else:
            self.say(f"Received FD: {fds[0]}, size: {meta['alloc_size']} bytes")

    def _check_peer(self) -> None:
        """A consumer on another GPU must be able to reach the producer's device (NVLink/PCIe P2P)."""
        owner, own = self.state["owner_device"], self.state["device"]
        if owner == own:
            return
        ok = self.backend.can_access_peer(owner)
        self.state["peer_access"] = ok
        if not ok:
            raise StepError(failure("PEER_UNREACHABLE", "cuDeviceCanAccessPeer",
                                    f"device {own} cannot access memory on device {owner}"))
        self.say(f"Device {own} can access device {owner}'s memory (peer access)")

    def _c_import(self) -> None:
        self._check_peer()
        if self.legacy:
            self.va = self.backend.ipc_open(bytes.fromhex(self.state["ipc_handle"]))
            size = self.state["alloc_size"]
            self.state.update(va=self.va, va_end=self.va + size, mapped_size=size, access="read/write", opened=True)
            self.say(f"Opened the IPC handle: the producer's memory is at 0x{self.va:x} in this process")
            if self.cfg.scenario == "legacy-second-context":
                self._second_context()
            return
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

    def _second_context(self) -> None:
        """Seed 003's rule, tried for real: again in this context (counted), then from a second context."""
        handle = bytes.fromhex(self.state["ipc_handle"])
        again = self.backend.ipc_open(handle)
        self.say(f"SCENARIO: opened again in the same context: {'the same pointer' if again == self.va else 'a NEW pointer'} "
                 f"0x{again:x} (the driver counts the opens)")
        self.backend.ipc_close(again)
        code = self.backend.ipc_open_in_second_context(handle)
        self.state["second_context"] = code
        if code == "CUDA_SUCCESS":
            self.say("SCENARIO: a second context on the same device opened it too: this driver did not enforce the rule")
            return
        raise StepError(failure(code, "cuIpcOpenMemHandle (second context)",
                                f"a second context on device {self.state['device']} in pid {os.getpid()}"))

    def _c_verify(self) -> None:
        self._verify()

    def _slice(self) -> tuple[int, int]:
        """This consumer's integers [start, end): equal slices, each starting at a multiple of 4 (16 bytes)."""
        count = self.state["alloc_size"] // 4
        k = int(self.role.rsplit("-", 1)[1]) if "-" in self.role else 1
        per = (count // self.cfg.consumers) // 4 * 4
        return (k - 1) * per, count if k == self.cfg.consumers else k * per

    def _c_write(self) -> None:
        start, end = self._slice()
        on = "device" if self.backend.name == "cuda" and self.cfg.verify != "host" else "host"
        self.backend.fill(self.va + start * 4, (end - start) * 4, on, first=start)
        self.state.update(slice=[start, end], write_on=on, **(self._gpu_ms("write") if on == "device" else {}))
        self.say(f"Wrote integers [{start}, {end}) of the shared buffer"
                 + (" with the fill kernel on this process's stream; the stream has finished" if on == "device" else ""))

    def _gpu_ms(self, what: str) -> dict[str, float]:
        """The last kernel's GPU time (CUDA events), for the bench and the inspector's card."""
        ms = getattr(getattr(self.backend, "kernels", None), "last_ms", None)
        return {f"{what}_gpu_ms": ms} if ms is not None else {}

    def _verify(self, what: str = "") -> None:
        on = self.cfg.verify
        result = self.backend.verify(self.va, self.state["alloc_size"], on)
        self.state["verification"] = asdict(result) | {"passed": result.passed, "on": on}
        self.state.update(self._gpu_ms("verify") if on != "host" else {})
        if what:
            self.say(f"{what} ({on})")
        elif on == "device":
            self.say(f"Checked {self.state['alloc_size']} bytes on the GPU (verify_pattern kernel)")
        elif on == "both":
            self.say(f"Checked {self.state['alloc_size']} bytes on the GPU and again on the host: they agree")
        elif self.backend.name == "cuda":
            self.say(f"Copied {self.state['alloc_size']} bytes from GPU to host")
        else:
            self.say(f"Read {self.state['alloc_size']} bytes through the shared mapping")
        self.say(result.describe())
        if not result.passed:
            raise StepError(failure("VERIFY_MISMATCH", "verify", result.describe()))

    def _c_ack(self) -> None:
        if self.cfg.direction == "consumer-writes":
            ack = {"type": "ack", "verified": "slice" in self.state, "slice": self.state.get("slice"),
                   "detail": "slice written" if "slice" in self.state else "nothing written"}
        else:
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
        if self.legacy and self.va is not None:
            if self.kind == CONSUMER:
                attempt(self.backend.ipc_close, self.va)
            else:
                attempt(self.backend.free, self.va)
            self.va = self.handle = None
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
        for what in ("exported", "received"):
            for fd in [h.fd for h in self.held.values() if h.kind == what]:
                if self.cfg.scenario == "leaked-fd" and what == "received":
                    self.say(f"SCENARIO leaked-fd: not closing the received fd {fd}")
                    continue
                self.close_fd(fd, what)
        self.close_socket("sock")
        for peer, conn in list(self.peers.items()):
            self._close_sock(conn, f"connection to {peer}")
            del self.peers[peer]
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
    p.add_argument("--role", required=True, help="producer, consumer or consumer-K (one of several)")
    p.add_argument("--backend", choices=["cuda", "memfd"], required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--socket", required=True)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--control-fd", type=int, required=True)
    p.add_argument("--connect-timeout", type=float, default=10.0)
    p.add_argument("--accept-timeout", type=float, default=10.0)
    p.add_argument("--ack-timeout", type=float, default=120.0)
    p.add_argument("--scenario")
    p.add_argument("--verify", choices=["host", "device", "both"], default="host")
    p.add_argument("--mechanism", choices=MECHANISMS, default="vmm")
    p.add_argument("--consumers", type=int, default=1)
    p.add_argument("--direction", choices=DIRECTIONS, default="producer-writes")
    p.add_argument("--crash", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if kind(a.role) not in (PRODUCER, CONSUMER):
        p.error(f"unknown role {a.role!r}")
    _die_with_parent()
    signal.signal(signal.SIGTERM, _terminate)
    control_fd = _settle_control_fd(a.control_fd)
    control = LineChannel(socket.socket(fileno=control_fd))
    cfg = WorkerConfig(a.role, a.backend, a.size, a.socket, a.device, a.connect_timeout, a.accept_timeout,
                       a.ack_timeout, a.scenario, a.verify, a.mechanism, a.consumers, a.direction, a.crash)
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
