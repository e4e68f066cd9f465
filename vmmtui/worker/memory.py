"""The steps both roles run on the memory: init, reserve, map, set access, verify, cleanup."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vmmtui.plan.config import Verify
from vmmtui.plan.steps import CONSUMER
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.state import HeldKind
from vmmtui.system.interrupts import signals_held
from vmmtui.wire import channel
from vmmtui.worker import transport

if TYPE_CHECKING:
    from vmmtui.worker.core import Worker


#: what a second signal must not cut short: the socket file's unlink, the last release
def init(w: Worker) -> None:
    b = w.backend
    banner = f"{b.title} {w.sharing.title}" if b.has_device else b.title
    w.say(f"=== {banner} {w.role.capitalize()} ===")
    transport.prepare(w)
    info = b.init(w.cfg.device)
    w.info = info
    w.state.device, w.state.device_name, w.state.backend_label = info.index, info.name, info.label
    if b.has_device:
        w.say(f"Using {b.title} device {info.index}: {info.name}")
    else:
        w.say(f"Using the {b.name} backend: {info.name}")
    if w.cfg.verify != Verify.HOST:  # the only case in which a kernel fills, writes or checks
        how = b.load_kernels()
        if how:
            w.say(f"Loaded the fill/verify kernels ({how})")
    # the wire's code runs once here, on a private socketpair, so that its first runs (0.1-0.2 ms a
    # socket step in a fresh process) are not inside the timed listen ... wait_ack
    w.calls.timed("socketpair + sendmsg + recvmsg (rehearsal)", {}, channel.rehearse, str)


def reserve(w: Worker) -> None:
    size = w.state.alloc_size
    w.va = w.backend.reserve(size, w.state.granularity or 0)
    w.state.mapping.va = w.va
    w.say(f"Reserved virtual address space at 0x{w.va:x}")


def map_range(w: Worker) -> None:
    w.backend.map(w.address, w.state.alloc_size, w.allocation)
    w.mapped = True
    w.state.mapping.size = w.state.alloc_size


def set_access(w: Worker) -> None:
    w.backend.set_access(w.address, w.state.alloc_size)
    w.state.mapping.access = "read/write"
    w.say("Set read/write access permissions")


def verify(w: Worker, what: str = "") -> None:
    """Check the pattern over the whole mapping where ``--verify`` says; a mismatch fails the step."""
    on, size, b = w.cfg.verify, w.state.alloc_size, w.backend
    result = dataclasses.replace(b.verify(w.address, size, on), on=on)
    w.state.verification = result
    if on != Verify.HOST:
        w.gpu_ms("verify")
    if what:
        w.say(f"{what} ({on})")
    elif on == Verify.DEVICE:
        w.say(f"Checked {size} bytes on the GPU (verify_pattern kernel)")
    elif on == Verify.BOTH:
        w.say(f"Checked {size} bytes on the GPU and again on the host: they agree")
    elif b.has_device:
        w.say(f"Copied {size} bytes from GPU to host")
    else:
        w.say(f"Read {size} bytes through the shared mapping")
    w.say(result.describe())
    device_memory(w, "after verify")
    if not result.passed:
        raise StepError(failure("VERIFY_MISMATCH", "verify", result.describe()))


#: the importer-pins scenario: say cuMemGetInfo around the steps where the memory could be freed
MEMORY_FLAG = "report-device-memory"


def device_memory(w: Worker, when: str) -> None:
    """cuMemGetInfo now, kept under ``when`` and said (device backends; memfd has no device to ask)."""
    if MEMORY_FLAG not in w.flags or not w.backend_loaded:
        return
    got = w.backend.free_memory()
    if got is None:
        return
    free, total = got
    w.state.device_memory = got
    w.state.scenario_results[f"used {when}"] = str(total - free)
    w.say(
        f"cuMemGetInfo {when}: {(total - free) >> 20} MiB used of {total >> 20} MiB on the device"
    )


def cleanup(w: Worker) -> None:
    """Undo what was done, in reverse: unmap, free the range, release, close fds and sockets, unlink."""
    errors: list[StepError] = []

    def attempt(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except StepError as exc:
            errors.append(exc)

    wrong = None
    if "free-with-wrong-call" in w.flags and w.kind == CONSUMER and w.va is not None:
        w.say(f"SCENARIO: freeing 0x{w.va:x} with the wrong call first")
        wrong = w.backend.wrong_release(w.va)
        w.state.scenario_results["wrong_release"] = wrong
        w.say(f"The wrong call returned {wrong}; now cleaning up the right way")
    device_memory(w, "before release")
    w.sharing.release(w, attempt)
    for what in (HeldKind.EXPORTED, HeldKind.RECEIVED):
        for fd in w.book.of_kind(what):
            if "keep-received-fd" in w.flags and what == HeldKind.RECEIVED:
                w.say(f"SCENARIO: not closing the received fd {fd}")
                continue
            w.book.close_fd(fd, what)
    device_memory(w, "after release")  # the shared fd holds the allocation too: after its close
    if w.sock is not None:
        sock, w.sock = w.sock, None
        w.book.close_socket(sock, "sock")
    for peer, conn in list(w.peers.items()):
        w.book.close_socket(conn, f"connection to {peer}")
        del w.peers[peer]
    if w.listener is not None:
        with signals_held():  # the close and the unlink go together
            listener, w.listener = w.listener, None
            w.book.close_socket(listener, "listener")
            with contextlib.suppress(FileNotFoundError):
                w.calls.timed(
                    "unlink",
                    {"path": w.cfg.socket_path},
                    lambda: os.unlink(w.cfg.socket_path),
                    lambda _: "0",
                )
    if (
        w.backend_loaded
    ):  # a worker that never ran init has no backend to shut down (and need not import it)
        attempt(w.backend.shutdown)
    w.state.mapping.handle, w.state.mapping.va, w.state.mapping.size = None, None, 0
    w.state.exported_fd = w.state.received_fd = None
    if errors:
        raise errors[0]
    if wrong is not None and wrong not in ("CUDA_SUCCESS", "returned"):
        raise StepError(
            failure(
                wrong,
                "cuMemFree",
                "cuMemFree on imported VMM memory (the wrong release); "
                "the right cleanup ran after it",
            )
        )
    w.say("Cleanup complete")
