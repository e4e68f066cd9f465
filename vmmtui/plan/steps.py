"""The steps of each role, in seed 000's order, and the one global plan that interleaves them.

Each Step names the calls it makes and carries a few sentences of teaching text for the inspector.
``build_plan`` makes the plan for a mechanism (``vmm`` or seed 003's ``legacy`` IPC handles), a
number of consumers and a direction (the producer writes, or each consumer writes its slice).
With several consumers each is a worker named ``consumer-K`` and the producer's per-peer steps
carry the peer's name (``accept:consumer-2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum


class RoleKind(StrEnum):
    """The two kinds of worker. A worker's name is its kind, and ``-K`` for the K-th consumer of
    several (``consumer-2``): ``kind()`` takes the number off."""

    PRODUCER = "producer"
    CONSUMER = "consumer"


PRODUCER = RoleKind.PRODUCER
CONSUMER = RoleKind.CONSUMER
#: producer steps done once per consumer, named ``step:consumer-K`` when there are several
PER_PEER = ("accept", "send", "wait_ack")


@dataclass(frozen=True)
class Step:
    role: str
    name: str
    title: str
    apis: tuple[str, ...]
    teaching: str


_STEPS = [
    Step(
        PRODUCER,
        "init",
        "Initialise the driver",
        (
            "cuInit",
            "cuDeviceGet",
            "cuDeviceGetName",
            "cuDevicePrimaryCtxRetain",
            "cuModuleLoadData",
        ),
        "cuInit loads the driver and cuDevicePrimaryCtxRetain makes the device's primary context current. "
        "Every driver call after this runs against that context. The memfd backend has nothing to initialise "
        "beyond the page size.",
    ),
    Step(
        PRODUCER,
        "query",
        "Query VMM, fd support and granularity",
        ("cuDeviceGetAttribute", "cuMemGetAllocationGranularity"),
        "VMM allocations need VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, and exporting them as a file descriptor needs "
        "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED (the CUDA programming guide: query before you export). Sizes and addresses must be "
        "multiples of the allocation granularity, so the requested size is rounded up to it.",
    ),
    Step(
        PRODUCER,
        "create",
        "Create the physical allocation",
        ("cuMemCreate",),
        "cuMemCreate allocates physical memory and returns a generic allocation handle: no virtual address yet. "
        "requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR earmarks it for export; without it the "
        "export later fails. memfd: memfd_create + ftruncate make an anonymous file of that size.",
    ),
    Step(
        PRODUCER,
        "reserve",
        "Reserve a virtual address range",
        ("cuMemAddressReserve",),
        "cuMemAddressReserve reserves a range of virtual addresses without backing it. Physical memory and "
        "addresses are separate objects in VMM, which is what makes remapping and sharing possible. memfd: an "
        "anonymous PROT_NONE mapping reserves the range.",
    ),
    Step(
        PRODUCER,
        "map",
        "Map the allocation into the range",
        ("cuMemMap",),
        "cuMemMap binds the physical allocation to the reserved range. The mapping is not accessible until access "
        "is granted. memfd: mmap(MAP_FIXED|MAP_SHARED) of the memfd onto the reservation.",
    ),
    Step(
        PRODUCER,
        "set_access",
        "Grant read/write access",
        ("cuMemSetAccess",),
        "cuMemSetAccess grants the device read/write access to the mapped range; touching it before this faults. "
        "memfd: mprotect(PROT_READ|PROT_WRITE).",
    ),
    Step(
        PRODUCER,
        "fill",
        "Write the test pattern",
        ("fill_pattern kernel", "cuMemcpyHtoD"),
        "The producer writes data[i] = (i*2 + 1337) ^ 0xDEADBEEF as uint32 so that the consumer can prove it sees "
        "the same bytes. On CUDA a kernel (shipped as PTX, JIT-compiled by the driver) writes it at memory speed; with --verify "
        "host it is built on the host and copied with cuMemcpyHtoD, as the original VMM demo does. memfd writes straight into "
        "the shared pages.",
    ),
    Step(
        PRODUCER,
        "export",
        "Export the allocation as a file descriptor",
        ("cuMemExportToShareableHandle",),
        "cuMemExportToShareableHandle turns the allocation handle into a POSIX file descriptor. Whoever holds this "
        "fd can import the memory with read/write access, so it is handed only to the peer we launched. memfd: the "
        "memfd is duplicated (dup) as the exported fd.",
    ),
    Step(
        PRODUCER,
        "listen",
        "Listen on the Unix socket",
        ("socket", "bind", "listen"),
        "The producer binds a SOCK_SEQPACKET Unix socket inside a private 0700 directory and waits for the consumer. "
        "The fd can only travel between processes over a Unix socket, as SCM_RIGHTS ancillary data.",
    ),
    Step(
        CONSUMER,
        "init",
        "Initialise the driver",
        ("cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"),
        "The consumer is a separate process with its own context on the same device. It has no access to the "
        "producer's memory yet.",
    ),
    Step(
        CONSUMER,
        "connect",
        "Connect to the producer",
        ("socket", "connect"),
        "The consumer connects to the producer's socket, retrying until a deadline if the producer is not "
        "listening yet (the classic 'Connection refused: start producer first'). It checks the peer's pid with "
        "SO_PEERCRED.",
    ),
    Step(
        PRODUCER,
        "accept",
        "Accept the consumer and check who it is",
        ("accept", "getsockopt(SO_PEERCRED)"),
        "accept returns the connection, and SO_PEERCRED tells the kernel's view of the peer's pid and uid. The "
        "producer refuses anyone but the consumer it launched: an exported fd grants access to the memory.",
    ),
    Step(
        PRODUCER,
        "send",
        "Send the fd with SCM_RIGHTS",
        ("sendmsg(SCM_RIGHTS)",),
        "sendmsg with an SCM_RIGHTS control message makes the kernel install a duplicate of the fd in the "
        "receiver: a new fd number, the same open file description. The size and granularity travel beside it.",
    ),
    Step(
        CONSUMER,
        "receive",
        "Receive the fd",
        ("recvmsg(SCM_RIGHTS)",),
        "recvmsg delivers the metadata and a new fd number in the consumer. The consumer checks that exactly one "
        "fd arrived and that the control data was not truncated. The inspector asks the kernel (kcmp) whether "
        "both fds are the same file.",
    ),
    Step(
        CONSUMER,
        "import",
        "Import the allocation from the fd",
        ("cuMemImportFromShareableHandle",),
        "cuMemImportFromShareableHandle turns the fd back into an allocation handle in this process. The imported "
        "handle keeps the memory alive even if the producer releases its own. memfd: the fd itself is the handle "
        "(duplicated).",
    ),
    Step(
        CONSUMER,
        "reserve",
        "Reserve a virtual address range",
        ("cuMemAddressReserve",),
        "The consumer reserves its own address range: the same memory usually appears at a different virtual "
        "address in each process.",
    ),
    Step(
        CONSUMER,
        "map",
        "Map the imported allocation",
        ("cuMemMap",),
        "cuMemMap binds the imported allocation to the consumer's range: the same physical pages as the producer's, "
        "no copy.",
    ),
    Step(
        CONSUMER,
        "set_access",
        "Grant read/write access",
        ("cuMemSetAccess",),
        "Access rights are per mapping and per process: the consumer must grant them again for its own range.",
    ),
    Step(
        CONSUMER,
        "verify",
        "Read and verify the pattern",
        ("verify_pattern kernel", "cuMemcpyDtoH"),
        "The consumer reads the shared memory and checks every integer against the pattern. A pass proves both "
        "processes see the same physical memory. On CUDA a kernel counts mismatches and keeps the first one, with "
        "no copy; --verify host copies to the host and compares with numpy (the original demo's way); memfd compares the "
        "mapped pages in place.",
    ),
    Step(
        CONSUMER,
        "ack",
        "Acknowledge to the producer",
        ("send",),
        "The consumer sends the producer its verdict (PASSED, or what differed). It does not keep the memory "
        "alive: from the import on, the consumer's own handle and mapping pin it, so the producer could release "
        "its handle and exit without harm (the importer-pins scenario shows it). The producer waits for it so "
        "that the run ends with every consumer's result. Legacy IPC handles are the exception: there the "
        "exporter must not free the memory before every importer has closed the handle.",
    ),
    Step(
        PRODUCER,
        "wait_ack",
        "Receive the consumer's ACK",
        ("recv",),
        "The producer waits, with a deadline, for the consumer's verdict.",
    ),
    Step(
        CONSUMER,
        "cleanup",
        "Clean up (consumer)",
        ("cuMemUnmap", "cuMemAddressFree", "cuMemRelease", "close"),
        "Reverse order: unmap, free the address range, release the imported handle with cuMemRelease (never "
        "cuMemFree: that is for cuMemAlloc memory, and drivers have been seen to segfault on it), close the received fd and the socket.",
    ),
    Step(
        PRODUCER,
        "cleanup",
        "Clean up (producer)",
        ("cuMemUnmap", "cuMemAddressFree", "cuMemRelease", "close", "unlink"),
        "The producer unmaps, frees its range, releases its handle and closes the exported fd. The physical memory "
        "is freed when the last handle and fd referring to it are gone.",
    ),
]

_LEGACY = [
    Step(
        PRODUCER,
        "query",
        "Query the device for legacy IPC",
        ("cuDeviceGetAttribute",),
        "Legacy IPC (cuIpcGetMemHandle) needs unified addressing and a Linux driver; there is no granularity to respect: "
        "cuMemAlloc takes any size. Only a handle to a whole cuMemAlloc allocation can be shared.",
    ),
    Step(
        PRODUCER,
        "create",
        "Allocate with cuMemAlloc",
        ("cuMemAlloc",),
        "cuMemAlloc returns a device pointer: physical memory and a virtual address in one call, the classic way. "
        "No reserve, map or set-access steps follow: those are what VMM split apart.",
    ),
    Step(
        PRODUCER,
        "export",
        "Get the IPC handle",
        ("cuIpcGetMemHandle",),
        "cuIpcGetMemHandle returns a 64-byte opaque handle for the allocation. It is plain bytes, not a file "
        "descriptor: nothing in the producer's fd table changes, and anyone who learns the bytes can try to open it.",
    ),
    Step(
        PRODUCER,
        "send",
        "Send the 64-byte handle",
        ("sendmsg",),
        "The handle travels as ordinary bytes in the message; no SCM_RIGHTS, no fd. The consumer's fd table will "
        "show no new fd: that is the contrast with VMM's exported fd.",
    ),
    Step(
        CONSUMER,
        "receive",
        "Receive the handle bytes",
        ("recvmsg",),
        "recvmsg delivers the metadata and the 64 handle bytes; no fd arrives. The kernel cannot tell us (kcmp) "
        "that both processes share anything: only the driver knows.",
    ),
    Step(
        CONSUMER,
        "import",
        "Open the IPC handle",
        ("cuIpcOpenMemHandle",),
        "cuIpcOpenMemHandle(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) maps the producer's allocation into this process "
        "and returns a device pointer. The driver API reference's rules: one context per device per process may open a given "
        "handle, and it must be closed before the exporter frees the memory.",
    ),
    Step(
        CONSUMER,
        "cleanup",
        "Clean up (consumer)",
        ("cuIpcCloseMemHandle", "close"),
        "cuIpcCloseMemHandle unmaps the producer's memory from this process. It must run before the producer's "
        "cuMemFree (the ACK orders it here): closing after the exporter freed is undefined behaviour.",
    ),
    Step(
        PRODUCER,
        "cleanup",
        "Clean up (producer)",
        ("cuMemFree", "close", "unlink"),
        "With every consumer's handle closed (their ACKs came first), cuMemFree releases the allocation.",
    ),
]
_WRITES = [
    Step(
        PRODUCER,
        "clear",
        "Clear the buffer",
        ("cuMemsetD32",),
        "In memMapIPCDrv's direction the consumers write and the producer checks. The producer first sets every "
        "integer to 0, so that its check can only pass if every consumer's writes really landed.",
    ),
    Step(
        CONSUMER,
        "write",
        "Write this consumer's slice",
        ("fill_pattern kernel", "cuStreamSynchronize"),
        "Each consumer launches the fill kernel on its own stream over its slice of the shared buffer (the original demo's "
        "pattern at the global indices), and waits for the stream to finish before it acknowledges: the ACK is the "
        "synchronisation.",
    ),
    Step(
        PRODUCER,
        "verify",
        "Verify what the consumers wrote",
        ("verify_pattern kernel",),
        "After every consumer's ACK the producer checks the whole buffer through its own mapping: a pass proves "
        "each consumer wrote into the same physical memory.",
    ),
]

_POOL = [
    Step(
        PRODUCER,
        "query",
        "Query memory pool support",
        ("cuDeviceGetAttribute",),
        "Stream-ordered memory pools need MEMORY_POOLS_SUPPORTED, and sharing one needs "
        "MEMPOOL_SUPPORTED_HANDLE_TYPES to include POSIX_FILE_DESCRIPTOR. Allocations come from the pool in "
        "any size: there is no granularity to respect. This is the road of cuda.core's "
        "DeviceMemoryResource(ipc_enabled=True) and PyTorch's CUDA caching allocator with pools.",
    ),
    Step(
        PRODUCER,
        "create",
        "Create the pool and allocate from it",
        ("cuMemPoolCreate", "cuStreamCreate", "cuMemAllocFromPoolAsync", "cuStreamSynchronize"),
        "cuMemPoolCreate with CUmemPoolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR makes a "
        "pool that can be exported; without a handle type it never can. cuMemAllocFromPoolAsync takes an "
        "allocation from it in stream order: the pointer comes back at once, the memory is usable once the "
        "stream reaches the allocation (hence the synchronize).",
    ),
    Step(
        PRODUCER,
        "export",
        "Export the pool, then the pointer",
        ("cuMemPoolExportToShareableHandle", "cuMemPoolExportPointer"),
        "Two exports: cuMemPoolExportToShareableHandle turns the whole pool into a POSIX fd (it travels like "
        "VMM's fd), and cuMemPoolExportPointer turns one allocation into 64 bytes of CUmemPoolPtrExportData, "
        "which is not a handle: plain bytes, useless without the pool.",
    ),
    Step(
        PRODUCER,
        "send",
        "Send the pool's fd and the pointer's export data",
        ("sendmsg(SCM_RIGHTS)",),
        "The pool's fd travels as SCM_RIGHTS and the 64 export-data bytes in the message, beside the size. "
        "One pool fd serves every later allocation: a program sends it once, then only 64 bytes per pointer.",
    ),
    Step(
        CONSUMER,
        "receive",
        "Receive the pool's fd and the export data",
        ("recvmsg(SCM_RIGHTS)",),
        "recvmsg delivers the pool's fd and the 64 bytes. kcmp proves the fd is the producer's open file.",
    ),
    Step(
        CONSUMER,
        "import",
        "Import the pool, then the pointer",
        (
            "cuMemPoolImportFromShareableHandle",
            "cuMemPoolImportPointer",
            "cuMemGetAddressRange",
        ),
        "cuMemPoolImportFromShareableHandle turns the fd into a pool in this process (it cannot allocate: "
        "imported pools only import), and cuMemPoolImportPointer maps the producer's allocation from the "
        "export data: a device pointer here, no reserve or map steps. cuMemGetAddressRange asks the driver "
        "how large the allocation really is, against the size claimed.",
    ),
    Step(
        CONSUMER,
        "cleanup",
        "Clean up (consumer)",
        ("cuMemFreeAsync", "cuStreamSynchronize", "cuMemPoolDestroy", "close"),
        "The importer frees its pointer first (cuMemFreeAsync, completed before the exporter frees: the "
        "driver's rule for imported pool memory), destroys its imported pool and closes the fd.",
    ),
    Step(
        PRODUCER,
        "cleanup",
        "Clean up (producer)",
        ("cuMemFreeAsync", "cuStreamSynchronize", "cuMemPoolDestroy", "close", "unlink"),
        "After every consumer's ACK and free, the producer frees the allocation into its pool, destroys the "
        "pool (its memory goes back to the device) and closes the exported fd.",
    ),
]

_PIDFD = [
    Step(
        PRODUCER,
        "send",
        "Send our pid and the fd's number",
        ("prctl(PR_SET_PTRACER)", "sendmsg"),
        "PyTorch's expandable segments send no fd: the message holds the producer's pid and the exported fd's "
        "number, plain integers. The fd stays in the producer's table for the consumer to take. Yama's "
        "ptrace_scope 1 lets only an ancestor do that, so the producer first names the consumer with "
        "prctl(PR_SET_PTRACER, its pid) (EINVAL where there is no Yama: nothing to allow).",
    ),
    Step(
        CONSUMER,
        "receive",
        "Take the fd with pidfd_getfd",
        ("recvmsg", "pidfd_open", "pidfd_getfd"),
        "recvmsg brings the pid and fd number; the pid is checked against SO_PEERCRED (a number from the wire "
        "names whichever process has it). pidfd_open(pid) makes a pidfd, and pidfd_getfd(pidfd, fd) copies "
        "the producer's fd into this process: a new fd number, the same open file, and no message carried it. "
        "The kernel allows it only with ptrace access: seccomp profiles, Yama and PID namespaces refuse it, "
        "where SCM_RIGHTS would still work. kcmp proves both fds are one file.",
    ),
]

STEPS: dict[tuple[str, str], Step] = {(s.role, s.name): s for s in _STEPS + _WRITES}
PIDFD_STEPS: dict[tuple[str, str], Step] = {(s.role, s.name): s for s in _PIDFD}
POOL_STEPS: dict[tuple[str, str], Step] = {(s.role, s.name): s for s in _POOL}
LEGACY_STEPS: dict[tuple[str, str], Step] = {(s.role, s.name): s for s in _LEGACY}
#: step tables by mechanism, over the VMM one
BY_MECHANISM = {"legacy": LEGACY_STEPS, "pool": POOL_STEPS}
_VMM_ONLY = ("reserve", "map", "set_access")


def kind(role: str) -> str:
    """A worker name without its number (``consumer-2`` → ``consumer``): a RoleKind's value for
    every worker vmmtui starts (anything else is a name from elsewhere, kept as it is)."""
    return role.split("-", 1)[0]


def base(step: str) -> str:
    """A step name without its peer (``accept:consumer-2`` → ``accept``)."""
    return step.split(":", 1)[0]


def peer_of(step: str) -> str:
    """The consumer a per-peer producer step is about (``accept:consumer-2`` → ``consumer-2``)."""
    return step.split(":", 1)[1] if ":" in step else CONSUMER


def consumer_names(count: int) -> list[str]:
    return [CONSUMER] if count == 1 else [f"{CONSUMER}-{k}" for k in range(1, count + 1)]


def step_info(role: str, name: str, mechanism: str = "vmm", transport: str = "scm-rights") -> Step:
    """The Step for ``role``'s step ``name`` in this mechanism and transport, with the peer in the title."""
    key = (kind(role), base(name))
    pidfd = transport == "pidfd" and mechanism != "legacy"
    step = (
        (PIDFD_STEPS.get(key) if pidfd else None)
        or BY_MECHANISM.get(mechanism, {}).get(key)
        or STEPS[key]
    )
    if ":" in name:
        step = replace(step, title=f"{step.title} ({name.split(':', 1)[1]})")
    return step


def build_plan(
    mechanism: str = "vmm", consumers: int = 1, direction: str = "producer-writes"
) -> list[tuple[str, str]]:
    """The global order of every worker's steps."""
    names = consumer_names(consumers)
    writes = direction == "consumer-writes"

    def peer(step: str, name: str) -> str:
        return step if consumers == 1 else f"{step}:{name}"

    def keep(step: str) -> bool:
        return not (mechanism in ("legacy", "pool") and step in _VMM_ONLY)

    pre = [s for s in ("init", "query", "create", "reserve", "map", "set_access") if keep(s)]
    plan: list[tuple[str, str]] = [(PRODUCER, s) for s in pre]
    plan += [(PRODUCER, "clear" if writes else "fill"), (PRODUCER, "export"), (PRODUCER, "listen")]
    plan += [(n, "init") for n in names]
    for n in names:
        plan += [
            (n, "connect"),
            (PRODUCER, peer("accept", n)),
            (PRODUCER, peer("send", n)),
            (n, "receive"),
        ]
        plan += [(n, s) for s in ("import", "reserve", "map", "set_access") if keep(s)]
        plan += [(n, "write" if writes else "verify"), (n, "ack"), (PRODUCER, peer("wait_ack", n))]
    if writes:
        plan.append((PRODUCER, "verify"))
    plan += [(n, "cleanup") for n in names] + [(PRODUCER, "cleanup")]
    return plan


def role_steps(role: str, plan: list[tuple[str, str]]) -> list[str]:
    """The names of ``role``'s steps in plan order."""
    return [name for r, name in plan if r == role]


#: a teaching sentence about the CPU backend begins so (its ``memfd_create``, ``mmap``, ``dup``)
_MEMFD_SENTENCE = re.compile(
    r"(?:^|(?<=[.);]\s))(?:The )?memfd(?::| (?:writes|compares|has|backend)\b)"
)


def teaching_for(text: str, backend: str) -> str:
    """A step's teaching text for the backend the session runs: on the cuda backend the sentences
    about what the memfd backend does instead are left out (they named a backend that is not
    running); on memfd every sentence stays (the lesson is CUDA's, its memfd stand-in said)."""
    if backend != "cuda":
        return text
    m = _MEMFD_SENTENCE.search(text)
    if m is None:
        return text
    kept = text[: m.start()].rstrip()
    return kept[:-1] + "." if kept.endswith((";", ",")) else kept
