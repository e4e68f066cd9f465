"""The steps of each role, in seed 000's order, and the one global plan that interleaves them.

Each Step names the calls it makes and carries a few sentences of teaching text for the inspector.
"""

from __future__ import annotations

from dataclasses import dataclass

PRODUCER = "producer"
CONSUMER = "consumer"
ROLES = (PRODUCER, CONSUMER)


@dataclass(frozen=True)
class Step:
    role: str
    name: str
    title: str
    apis: tuple[str, ...]
    teaching: str


_STEPS = [
    Step(PRODUCER, "init", "Initialise the driver", ("cuInit", "cuDeviceGet", "cuDeviceGetName", "cuDevicePrimaryCtxRetain"),
         "cuInit loads the driver and cuDevicePrimaryCtxRetain makes the device's primary context current. "
         "Every driver call after this runs against that context. The memfd backend has nothing to initialise "
         "beyond the page size."),
    Step(PRODUCER, "query", "Query VMM, fd support and granularity", ("cuDeviceGetAttribute", "cuMemGetAllocationGranularity"),
         "VMM allocations need VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, and exporting them as a file descriptor needs "
         "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED (seed 004: query before you export). Sizes and addresses must be "
         "multiples of the allocation granularity, so the requested size is rounded up to it."),
    Step(PRODUCER, "create", "Create the physical allocation", ("cuMemCreate",),
         "cuMemCreate allocates physical memory and returns a generic allocation handle: no virtual address yet. "
         "requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR earmarks it for export; without it the "
         "export later fails. memfd: memfd_create + ftruncate make an anonymous file of that size."),
    Step(PRODUCER, "reserve", "Reserve a virtual address range", ("cuMemAddressReserve",),
         "cuMemAddressReserve reserves a range of virtual addresses without backing it. Physical memory and "
         "addresses are separate objects in VMM, which is what makes remapping and sharing possible. memfd: an "
         "anonymous PROT_NONE mapping reserves the range."),
    Step(PRODUCER, "map", "Map the allocation into the range", ("cuMemMap",),
         "cuMemMap binds the physical allocation to the reserved range. The mapping is not accessible until access "
         "is granted. memfd: mmap(MAP_FIXED|MAP_SHARED) of the memfd onto the reservation."),
    Step(PRODUCER, "set_access", "Grant read/write access", ("cuMemSetAccess",),
         "cuMemSetAccess grants the device read/write access to the mapped range; touching it before this faults. "
         "memfd: mprotect(PROT_READ|PROT_WRITE)."),
    Step(PRODUCER, "fill", "Write the test pattern", ("cuMemcpyHtoD",),
         "The producer writes data[i] = (i*2 + 1337) ^ 0xDEADBEEF as uint32 so that the consumer can prove it sees "
         "the same bytes. On CUDA the pattern is built on the host and copied with cuMemcpyHtoD; memfd writes "
         "straight into the shared pages."),
    Step(PRODUCER, "export", "Export the allocation as a file descriptor", ("cuMemExportToShareableHandle",),
         "cuMemExportToShareableHandle turns the allocation handle into a POSIX file descriptor. Whoever holds this "
         "fd can import the memory with read/write access, so it is handed only to the peer we launched. memfd: the "
         "memfd is duplicated (dup) as the exported fd."),
    Step(PRODUCER, "listen", "Listen on the Unix socket", ("socket", "bind", "listen"),
         "The producer binds a SOCK_SEQPACKET Unix socket inside a private 0700 directory and waits for the consumer. "
         "The fd can only travel between processes over a Unix socket, as SCM_RIGHTS ancillary data."),
    Step(CONSUMER, "init", "Initialise the driver", ("cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain"),
         "The consumer is a separate process with its own context on the same device. It has no access to the "
         "producer's memory yet."),
    Step(CONSUMER, "connect", "Connect to the producer", ("socket", "connect"),
         "The consumer connects to the producer's socket, retrying until a deadline if the producer is not "
         "listening yet (seed 000: 'Connection refused: start producer first'). It checks the peer's pid with "
         "SO_PEERCRED."),
    Step(PRODUCER, "accept", "Accept the consumer and check who it is", ("accept", "getsockopt(SO_PEERCRED)"),
         "accept returns the connection, and SO_PEERCRED tells the kernel's view of the peer's pid and uid. The "
         "producer refuses anyone but the consumer it launched: an exported fd grants access to the memory."),
    Step(PRODUCER, "send", "Send the fd with SCM_RIGHTS", ("sendmsg(SCM_RIGHTS)",),
         "sendmsg with an SCM_RIGHTS control message makes the kernel install a duplicate of the fd in the "
         "receiver: a new fd number, the same open file description. The size and granularity travel beside it."),
    Step(CONSUMER, "receive", "Receive the fd", ("recvmsg(SCM_RIGHTS)",),
         "recvmsg delivers the metadata and a new fd number in the consumer. The consumer checks that exactly one "
         "fd arrived and that the control data was not truncated. The inspector asks the kernel (kcmp) whether "
         "both fds are the same file."),
    Step(CONSUMER, "import", "Import the allocation from the fd", ("cuMemImportFromShareableHandle",),
         "cuMemImportFromShareableHandle turns the fd back into an allocation handle in this process. The imported "
         "handle keeps the memory alive even if the producer releases its own. memfd: the fd itself is the handle "
         "(duplicated)."),
    Step(CONSUMER, "reserve", "Reserve a virtual address range", ("cuMemAddressReserve",),
         "The consumer reserves its own address range: the same memory usually appears at a different virtual "
         "address in each process."),
    Step(CONSUMER, "map", "Map the imported allocation", ("cuMemMap",),
         "cuMemMap binds the imported allocation to the consumer's range: the same physical pages as the producer's, "
         "no copy."),
    Step(CONSUMER, "set_access", "Grant read/write access", ("cuMemSetAccess",),
         "Access rights are per mapping and per process: the consumer must grant them again for its own range."),
    Step(CONSUMER, "verify", "Read and verify the pattern", ("cuMemcpyDtoH",),
         "The consumer reads the shared memory and checks every integer against the pattern. A pass proves both "
         "processes see the same physical memory."),
    Step(CONSUMER, "ack", "Acknowledge to the producer", ("send",),
         "The consumer tells the producer the result, so that the producer does not release memory it is still "
         "using elsewhere before the consumer is done with it."),
    Step(PRODUCER, "wait_ack", "Receive the consumer's ACK", ("recv",),
         "The producer waits, with a deadline, for the consumer's verdict."),
    Step(CONSUMER, "cleanup", "Clean up (consumer)", ("cuMemUnmap", "cuMemAddressFree", "cuMemRelease", "close"),
         "Reverse order: unmap, free the address range, release the imported handle with cuMemRelease (never "
         "cuMemFree: that is for cuMemAlloc memory; seed 000 saw a segfault), close the received fd and the socket."),
    Step(PRODUCER, "cleanup", "Clean up (producer)", ("cuMemUnmap", "cuMemAddressFree", "cuMemRelease", "close", "unlink"),
         "The producer unmaps, frees its range, releases its handle and closes the exported fd. The physical memory "
         "is freed when the last handle and fd referring to it are gone."),
]

STEPS: dict[tuple[str, str], Step] = {(s.role, s.name): s for s in _STEPS}
PLAN: list[tuple[str, str]] = [(s.role, s.name) for s in _STEPS]


def role_steps(role: str) -> list[str]:
    """The names of ``role``'s steps in plan order."""
    return [name for r, name in PLAN if r == role]
