"""The built-in scenarios, one record each: seed 000's troubleshooting table made real.

Nothing is simulated: the error shown is whatever the driver or kernel returned. Worker flags name
a behaviour (``unrounded-size``, ``keep-received-fd``, ``free-with-wrong-call`` ...); hooks are actions the session takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.backends import pidfd
from vmmtui.plan.steps import CONSUMER, PRODUCER
from vmmtui.scenarios.actions import (
    SIGKILL,
    Freeze,
    IntruderConnects,
    IntruderReport,
    Kill,
    PlantStaleSocket,
    Quit,
    ShowPinned,
)
from vmmtui.scenarios.model import ANY, ANY_ERROR, Drop, Hook, RunEarly, Scenario, StopAfter

if TYPE_CHECKING:
    from vmmtui.backends.probe import DeviceRecord


def _fabric_cannot(device: DeviceRecord) -> str | None:
    """fabric-without-imex needs a device that supports fabric handles but where the probe's try was refused."""
    if not device.fabric:
        return (
            f"{device.name or 'this device'} does not support fabric handles "
            "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 0), so there is no IMEX refusal to show"
        )
    if device.fabric_create == "CUDA_SUCCESS":
        return (
            "fabric handles work here (cuMemCreate with CU_MEM_HANDLE_TYPE_FABRIC succeeded: an IMEX channel "
            "is open to this process), so there is no error to show"
        )
    return None


def _yama_cannot() -> str | None:
    """pidfd-yama needs Yama to refuse a sibling: ptrace_scope 1 or more, and no CAP_SYS_PTRACE here."""
    scope = pidfd.ptrace_scope()
    if scope is None:
        return (
            "this host has no Yama (/proc/sys/kernel/yama/ptrace_scope does not exist: the kernel was "
            "built without it, or it is not among the active LSMs), so nothing refuses a sibling's "
            "pidfd_getfd and there is no refusal to show"
        )
    if scope == 0:
        return (
            "Yama's ptrace_scope is 0 here (classic ptrace permissions: any process of the same user "
            "may take another's fds), so there is no refusal to show; Ubuntu and Debian default to 1"
        )
    return None


BUILT_IN: list[Scenario] = [
    Scenario(
        "unaligned-size",
        "skip the rounding to the granularity: the real cuMemCreate error",
        "cuMemCreate and cuMemMap take sizes that are multiples of the allocation granularity "
        "(cuMemGetAllocationGranularity). This run passes the size unrounded; the driver refuses it "
        "and nothing is allocated.",
        expect=("CUDA_ERROR_INVALID_VALUE",),
        at=(PRODUCER, "create"),
        cannot={
            "memfd": "the kernel rounds mmap lengths up to a page by itself, so an unaligned memfd size "
            "is accepted and there is no error to show"
        },
        flags={PRODUCER: ("unrounded-size",)},
    ),
    Scenario(
        "consumer-first",
        "the consumer connects before the producer listens: refused, retried, then connected",
        "The consumer starts its connect before the socket exists. connect() fails (ENOENT: no socket file "
        "yet; ECONNREFUSED: a file but nobody listening) and is retried until the deadline; once the producer "
        "listens, the next try succeeds. The retries are counted in the connect step.",
        edits=(RunEarly(((CONSUMER, "init"), (CONSUMER, "connect")), before=(PRODUCER, "listen")),),
        background=((CONSUMER, "connect"),),
    ),
    Scenario(
        "stale-socket",
        "a socket file left by a dead run: detected, removed, explained",
        "Before the producer listens, a real process binds the socket path and is killed, leaving the file "
        "behind as a crashed run would. bind() would fail with EADDRINUSE; the producer first connects to the "
        "file, gets ECONNREFUSED (nobody listening), removes it and binds again.",
        hooks=(Hook("before", PRODUCER, "listen", PlantStaleSocket()),),
    ),
    Scenario(
        "wrong-release",
        "the consumer frees imported memory with cuMemFree instead of cuMemRelease",
        "cuMemFree is for cuMemAlloc memory. On an imported VMM mapping it is the wrong call: the run shows "
        "what the driver really answers (drivers have been seen to segfault), then cleans up the right way "
        "(cuMemUnmap, cuMemAddressFree, cuMemRelease). On memfd the analogue is libc free() on the mapped "
        "address, which kills the worker: the inspector shows the signal and the session cleans up.",
        expect=(ANY,),
        at=(CONSUMER, "cleanup"),
        flags={CONSUMER: ("free-with-wrong-call",)},
    ),
    Scenario(
        "producer-dies",
        "the producer is killed right after sending the fd: the consumer still verifies",
        "An allocation lives while any handle or fd refers to it. The producer is SIGKILLed right after "
        "sendmsg; the consumer still imports, maps and verifies through the fd it received, then cleans up. "
        "The producer's ACK and cleanup steps and the consumer's ACK are left out of the plan.",
        edits=(Drop(((PRODUCER, "wait_ack"), (PRODUCER, "cleanup"), (CONSUMER, "ack"))),),
        hooks=(
            Hook(
                "after",
                PRODUCER,
                "send",
                Kill(PRODUCER, SIGKILL, "right after sending the fd"),
            ),
        ),
    ),
    Scenario(
        "consumer-dies",
        "the consumer is killed after mapping: the producer sees the socket close and cleans up",
        "The consumer is SIGKILLed after cuMemMap, before it verifies. The kernel closes its socket, so the "
        "producer's wait for the ACK ends at once with end-of-file (PEER_CLOSED), not by its deadline; "
        "the producer then cleans up. See consumer-hangs for the deadline.",
        expect=("PEER_CLOSED",),
        at=(PRODUCER, "wait_ack"),
        edits=(StopAfter((CONSUMER, "map"), keep=PRODUCER),),
        hooks=(
            Hook(
                "after",
                CONSUMER,
                "map",
                Kill(CONSUMER, SIGKILL, "after mapping, before verifying"),
            ),
        ),
    ),
    Scenario(
        "consumer-hangs",
        "the consumer freezes after mapping: the producer's ACK deadline fires",
        "The consumer is stopped (SIGSTOP) after cuMemMap, so its socket stays open but nothing arrives. "
        "The producer's ACK wait runs into its deadline (3 s in this scenario) with ETIMEDOUT, cleans up, "
        "and the session kills the frozen consumer.",
        expect=("ETIMEDOUT",),
        at=(PRODUCER, "wait_ack"),
        edits=(StopAfter((CONSUMER, "map"), keep=PRODUCER),),
        ack_timeout=3.0,
        hooks=(Hook("after", CONSUMER, "map", Freeze(CONSUMER)),),
    ),
    Scenario(
        "leaked-fd",
        "the consumer never closes the received fd: flagged at cleanup from /proc",
        "The consumer's cleanup skips close() on the fd that arrived by SCM_RIGHTS. After the step the session "
        "reads /proc/PID/fd and finds the same file still open, and flags the leak with its number and target. "
        "A leaked fd keeps the allocation alive until the process exits.",
        expect=("FD_LEAK",),
        at=(CONSUMER, "cleanup"),
        flags={CONSUMER: ("keep-received-fd",)},
    ),
    Scenario(
        "no-fd-handle-type",
        "allocate without requestedHandleTypes = POSIX_FILE_DESCRIPTOR: export fails",
        "A handle type must be requested when the allocation is created (the CUDA programming guide: "
        "CUmemAllocationProp::requestedHandleTypes); without it the allocation cannot be exported as an fd "
        "and cuMemExportToShareableHandle fails.",
        expect=("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_NOT_SUPPORTED"),
        at=(PRODUCER, "export"),
        cannot={
            "memfd": "a memfd is a file descriptor from the start; there is no allocation without an fd "
            "handle type to export"
        },
        flags={PRODUCER: ("without-fd-handle-type",)},
    ),
    Scenario(
        "intruder",
        "a third process connects first: refused by SO_PEERCRED, gets no fd",
        "Right after the producer listens, another process connects before the consumer. The producer reads "
        "SO_PEERCRED, sees a pid other than the consumer it launched, logs the intruder's pid and uid, closes "
        "that connection and keeps waiting. The intruder reports how many fds it received: none.",
        hooks=(
            Hook("after", PRODUCER, "listen", IntruderConnects()),
            Hook("after", PRODUCER, "accept", IntruderReport()),
        ),
    ),
    Scenario(
        "out-of-memory",
        "ask for more than the free device memory: CUDA_ERROR_OUT_OF_MEMORY",
        "The producer reads the free memory (cuMemGetInfo) and asks cuMemCreate for 1 GiB more than that. "
        "The driver refuses with CUDA_ERROR_OUT_OF_MEMORY and nothing is left allocated.",
        expect=("CUDA_ERROR_OUT_OF_MEMORY",),
        at=(PRODUCER, "create"),
        cannot={
            "memfd": "memfd pages are allocated lazily: ftruncate to any size succeeds, and running out "
            "would mean the kernel's OOM killer, which vmmtui will not provoke"
        },
        flags={PRODUCER: ("oversize",)},
    ),
    Scenario(
        "legacy-second-context",
        "legacy IPC: open the handle again from a second context on the same device",
        "The driver API reference: a legacy IPC handle may be opened by one context per device per process. The consumer opens it "
        "in its primary context, opens it there again (the driver only counts the opens and returns the same "
        "pointer), then creates a second context on the same device and opens it from there: the driver refuses.",
        expect=(ANY_ERROR,),
        at=(CONSUMER, "import"),
        mechanism="legacy",
        cannot={"memfd": "legacy IPC handles are a CUDA driver feature; memfd has no legacy mode"},
        flags={CONSUMER: ("open-second-context",)},
    ),
    Scenario(
        "fabric-without-imex",
        "ask for a fabric handle where no IMEX channel exists: refused at cuMemCreate",
        "Fabric handles (CU_MEM_HANDLE_TYPE_FABRIC) share memory across the nodes of an NVLink domain such as "
        "GB200 NVL72: a 64-byte handle that can travel over any channel, even TCP. The device attribute may say "
        "yes (an H100 does), but the driver only grants one to a process that can open an IMEX channel "
        "(/dev/nvidia-caps-imex-channels, made by the IMEX daemon). Here there is none: cuMemCreate refuses.",
        expect=("CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_NOT_SUPPORTED"),
        at=(PRODUCER, "create"),
        cannot={
            "memfd": "fabric handles are a CUDA driver feature of NVLink-domain GPUs; memfd has no analogue"
        },
        device_cannot=_fabric_cannot,
        flags={PRODUCER: ("fabric-handle",)},
    ),
    Scenario(
        "pool-no-handle-type",
        "a memory pool created without a shareable handle type cannot be exported",
        "cuMemPoolCreate takes CUmemPoolProps.handleTypes; with CU_MEM_HANDLE_TYPE_NONE (the default of a "
        "zeroed struct, and of cudaMallocAsync's default pool) the pool is not IPC capable, whatever its "
        "allocations. The producer creates such a pool and allocates from it; cuMemPoolExportToShareableHandle "
        "refuses, and nothing is left allocated.",
        expect=("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_NOT_PERMITTED"),
        at=(PRODUCER, "export"),
        mechanism="pool",
        cannot={
            "memfd": "memory pools are a CUDA road (stream-ordered GPU allocations); memfd has no pool to "
            "export"
        },
        flags={PRODUCER: ("pool-without-handle-type",)},
    ),
    Scenario(
        "pidfd-seccomp",
        "pidfd_getfd under Docker's default seccomp profile: EPERM",
        "The pidfd road (PyTorch's expandable segments, UCX cuda_ipc): the producer sends its pid and the "
        "fd's number, the consumer takes the fd with pidfd_open + pidfd_getfd. Docker's default seccomp "
        "profile refuses pidfd_getfd to a container without CAP_SYS_PTRACE. The consumer installs such a "
        "filter on itself at init (prctl(PR_SET_NO_NEW_PRIVS) then prctl(PR_SET_SECCOMP) with a 7-instruction "
        "BPF program, no root needed); pidfd_open still works, pidfd_getfd gets EPERM: the bare "
        "'Operation not permitted' users report.",
        expect=("EPERM",),
        at=(CONSUMER, "receive"),
        transport="pidfd",
        flags={CONSUMER: ("seccomp-deny-pidfd-getfd",)},
    ),
    Scenario(
        "pidfd-yama",
        "pidfd_getfd between siblings under Yama ptrace_scope 1: EPERM",
        "Yama's ptrace_scope 1 (Ubuntu's default) lets a process ptrace, and so take fds from, only its "
        "descendants, unless the target names it with prctl(PR_SET_PTRACER). vmmtui's producer and consumer "
        "are siblings; on the pidfd road the producer names the consumer before it sends. This run leaves "
        "that out, as most programs do, and the consumer drops an effective CAP_SYS_PTRACE (which Yama "
        "lets through) as an unprivileged program has none: pidfd_getfd gets EPERM.",
        expect=("EPERM",),
        at=(CONSUMER, "receive"),
        transport="pidfd",
        host_cannot=_yama_cannot,
        flags={PRODUCER: ("no-ptracer",), CONSUMER: ("no-effective-cap-sys-ptrace",)},
    ),
    Scenario(
        "pidfd-pidns",
        "the consumer's PID namespace is not the producer's: the pid names nobody there",
        "A pid is a number in one PID namespace. The producer sends its pid; the consumer opens it from a "
        "process it forks into a new PID namespace (unshare(CLONE_NEWPID), with a user namespace when not "
        "root), as a container with its own PID namespace would. There the pid names nobody (ESRCH) or "
        "another process; pidfd_getfd cannot even be tried. SCM_RIGHTS crosses PID namespaces.",
        expect=("ESRCH", "PIDFD_WRONG_PROCESS"),
        at=(CONSUMER, "receive"),
        transport="pidfd",
        host_cannot=pidfd.new_pidns_allowed,
        flags={CONSUMER: ("take-from-new-pidns",)},
    ),
    Scenario(
        "pidfd-producer-gone",
        "the producer exits between sending its pid and the consumer's pidfd_getfd: ESRCH",
        "On the pidfd road the fd stays in the producer until the consumer takes it. Here the producer is "
        "SIGKILLed right after it sent its pid and fd number, before the consumer's receive: the pid names "
        "nobody any more and pidfd_open fails with ESRCH. With SCM_RIGHTS the fd would already be in flight "
        "(see producer-dies, which verifies).",
        expect=("ESRCH",),
        at=(CONSUMER, "receive"),
        transport="pidfd",
        edits=(Drop(((PRODUCER, "wait_ack"), (PRODUCER, "cleanup"), (CONSUMER, "ack"))),),
        hooks=(
            Hook(
                "after",
                PRODUCER,
                "send",
                Kill(PRODUCER, SIGKILL, "right after sending its pid"),
            ),
        ),
    ),
    Scenario(
        "importer-pins",
        "the producer releases everything and exits while the consumer maps: the memory stays",
        "An allocation is freed when its last reference goes, not when its creator releases it. After the "
        "consumer maps, the producer runs its whole cleanup (unmap, release, close the exported fd) and "
        "exits; the consumer still verifies every integer. On memfd the kernel's view shows it: the "
        "consumer's /proc/PID/maps still maps the memfd; on cuda cuMemGetInfo does: the memory stays used "
        "after the producer's release and is freed by the consumer's (cuda-samples#155, pytorch#145703).",
        edits=(
            Drop(((PRODUCER, "wait_ack"), (CONSUMER, "ack"))),
            RunEarly(((PRODUCER, "cleanup"),), before=(CONSUMER, "verify")),
        ),
        flags={PRODUCER: ("report-device-memory",), CONSUMER: ("report-device-memory",)},
        hooks=(
            Hook("after", PRODUCER, "cleanup", Quit(PRODUCER, "after releasing everything")),
            Hook("after", PRODUCER, "cleanup", ShowPinned(CONSUMER)),
            Hook("after", CONSUMER, "cleanup", ShowPinned(CONSUMER)),
        ),
    ),
]
