"""Failures a user can meet, each with a one-line cause and a fix.

Seed 000's troubleshooting table is the floor; every code the workers or the session can raise
has an entry here, so no error reaches the screen without an explanation.
"""

from __future__ import annotations

from vmmtui.stream.failures import Failure

# code -> (cause, fix)
TABLE: dict[str, tuple[str, str]] = {
    "CUDA_ERROR_NOT_SUPPORTED": (
        "VMM or POSIX-fd shareable handles are not supported by this GPU or driver",
        "check compute capability >= 6.0 and CUDA >= 10.2 with `vmmtui doctor`, or use --backend memfd",
    ),
    "CUDA_ERROR_INVALID_VALUE": (
        "an argument is invalid; for cuMemCreate/cuMemMap usually a size or address not aligned to the allocation granularity",
        "round sizes up to the granularity from cuMemGetAllocationGranularity (vmmtui does this for you)",
    ),
    "CUDA_ERROR_OUT_OF_MEMORY": (
        "the device has not enough free memory for this allocation",
        "ask for a smaller --size or free memory held by other processes (nvidia-smi)",
    ),
    "CUDA_ERROR_NO_DEVICE": (
        "the driver sees no CUDA device",
        "check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --backend memfd",
    ),
    "CUDA_ERROR_INVALID_DEVICE": (
        "the device ordinal does not exist",
        "pick a device listed by `vmmtui doctor`",
    ),
    "CUDA_ERROR_NOT_INITIALIZED": ("cuInit was not called or failed", "call cuInit(0) first"),
    "CUDA_ERROR_INVALID_HANDLE": (
        "the allocation handle or fd does not refer to a live allocation",
        "export from a live allocation and import the fd before anyone closes it",
    ),
    "CUDA_ERROR_NOT_PERMITTED": (
        "the driver refused the operation for this handle type",
        "create the allocation with requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
    ),
    "NO_DRIVER": (
        "no NVIDIA driver (libcuda.so.1 not found)",
        "install the NVIDIA driver, or run with --backend memfd",
    ),
    "ECONNREFUSED": ("the producer is not listening on the socket yet", "start the producer first"),
    "ENOENT": (
        "the socket file does not exist (the producer has not created it)",
        "start the producer first",
    ),
    "EADDRINUSE": (
        "the socket file exists: a previous run did not clean up",
        "remove the stale socket file (vmmtui removes stale session directories of dead runs)",
    ),
    "ENAMETOOLONG": (
        "the socket path is longer than AF_UNIX allows (108 bytes)",
        "use a shorter TMPDIR",
    ),
    "ETIMEDOUT": (
        "the peer did not answer before the deadline",
        "check that the other worker is alive; raise --timeout for very large buffers",
    ),
    "LISTENER_UNRESPONSIVE": (
        "the producer's socket accepted no connection before the deadline (--timeout): its listen backlog is full "
        "(another process may be flooding it with connections) or the producer is stuck",
        "find the processes connected to the socket (`ss -xp | grep vmmtui`) and stop them, then run again; "
        "if none, the producer is stuck: see its state and log",
    ),
    "SIZE_MISMATCH": (
        "the producer claimed a larger allocation than the fd it sent holds (as the kernel or the driver reports "
        "it); mapping the claimed size would fault (SIGBUS) or map memory that is not there",
        "nothing was mapped; the producer must send the size it allocated (both sides the same vmmtui version)",
    ),
    "UNSEALED": (
        "the memfd that arrived is not sealed against shrinking and growing (F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL): "
        "its owner could shrink it under our mapping and every access past the new end would be SIGBUS",
        "the producer must create the memfd with MFD_ALLOW_SEALING and seal it before export (vmmtui's does)",
    ),
    "NOT_MEMFD": (
        "the fd that arrived is not a memfd (a file, pipe, socket or device instead): it is not the "
        "producer's shared memory, and mapping it would show whatever it holds, or fault",
        "nothing was mapped; the producer must send the memfd it allocated (vmmtui's does): check "
        "what sent it (the peer's pid is in the wire panel, from SO_PEERCRED)",
    ),
    "PEER_REFUSED": (
        "a process other than the launched peer connected to the socket",
        "only the consumer this session launched may receive the fd; the intruder was refused",
    ),
    "BAD_MESSAGE": (
        "a malformed or unexpected message arrived on the socket",
        "make sure both sides run the same vmmtui version",
    ),
    "FD_COUNT": (
        "the message did not carry exactly one fd (truncated control data or extra fds)",
        "send exactly one fd per SCM_RIGHTS message; all received fds were closed",
    ),
    "FD_LEAK": (
        "a shared-memory fd is still open after the worker's cleanup (read from /proc); it keeps the allocation alive",
        "close every fd you export or receive once it is imported or no longer needed",
    ),
    "PEER_CLOSED": (
        "the peer closed the connection",
        "see the other worker's state for why it stopped",
    ),
    "VERIFY_MISMATCH": (
        "the data read through the imported mapping differs from the pattern the producer wrote",
        "check that the consumer imported the right fd and mapped the full size",
    ),
    "VERIFY_DISAGREE": (
        "the verification kernel and the host check found different mismatches: one of the two checkers is wrong",
        "report it with the log; run with --verify host to check on the host with numpy only",
    ),
    "PEER_UNREACHABLE": (
        "the consumer's GPU cannot access memory on the producer's GPU (no P2P path between them)",
        "put the consumers on GPUs that cuDeviceCanAccessPeer allows (nvidia-smi topo -p2p r), or use --devices with the producer's GPU",
    ),
    "NVRTC_ERROR": (
        "NVRTC (libnvrtc), the second way to build the fill/verify kernels (only used when the driver cannot JIT "
        "the PTX shipped in vmmtui), is missing or could not compile them for this GPU",
        "update the NVIDIA driver (R580 / CUDA 13.0 or newer JITs the shipped PTX), or pip install nvidia-cuda-nvrtc "
        "matching the driver's CUDA major, or run with --verify host",
    ),
    "WORKER_DIED": (
        "a worker process exited or was killed",
        "see its exit code or signal and its log below; restart the session",
    ),
    "WORKER_TIMEOUT": (
        "a worker did not finish its step in time",
        "it was stopped; raise --timeout for very large sizes",
    ),
    "PROTOCOL": (
        "a worker sent a malformed control message",
        "make sure the worker and session are the same vmmtui version",
    ),
    "OSERROR": ("a system call failed", "see the message for the errno"),
    "PYTHON": (
        "the call raised a Python exception instead of returning a CUresult",
        "see the message; check that cuda-python matches the installed driver",
    ),
    "UNAVAILABLE": ("this backend cannot run here", "run `vmmtui doctor` to see what is missing"),
}


# (call, code) -> (cause, fix): where one code means different things from different calls
BY_CALL: dict[tuple[str, str], tuple[str, str]] = {
    ("cuMemExportToShareableHandle", "CUDA_ERROR_INVALID_VALUE"): (
        "the allocation was created without requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, "
        "so it has no fd to export (the CUDA programming guide: request the handle type at creation)",
        "set prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR before cuMemCreate",
    ),
    ("cuIpcOpenMemHandle (second context)", "*"): (
        "the driver API reference's rule: a process may open a legacy IPC handle from one context per device; this was a "
        "second context on the same device",
        "open the handle once per device per process (the primary context) and share the pointer inside the "
        "process; opening it again in the same context only counts the opens (close as many times)",
    ),
    ("cuModuleLoadData (PTX)", "*"): (
        "the driver could not JIT-compile the fill/verify kernels shipped as PTX (PTX ISA 9.0 for sm_75: it needs an "
        "R580 / CUDA 13.0 driver or newer and a GPU of compute capability 7.5 or newer), and NVRTC was not there to "
        "build them instead",
        "update the NVIDIA driver, or pip install nvidia-cuda-nvrtc matching the driver's CUDA major (vmmtui then "
        "compiles the kernels itself), or run with --verify host (--verify auto does that by itself)",
    ),
    ("cuMemCreate (fabric)", "CUDA_ERROR_NOT_PERMITTED"): (
        "the device supports fabric handles, but this process has no IMEX channel: the driver grants "
        "CU_MEM_HANDLE_TYPE_FABRIC only where the IMEX daemon (nvidia-imex) runs and a channel device under "
        "/dev/nvidia-caps-imex-channels/ is open to the process, as on the nodes of an NVLink domain (GB200 NVL72)",
        "on a multi-node NVLink system start nvidia-imex and create a channel (/dev/nvidia-caps-imex-channels/"
        "channel0, e.g. with nvidia-modprobe -i 0:1), and in containers pass it through; on one node share with "
        "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, as vmmtui does by default",
    ),
    ("cuMemCreate (fabric)", "CUDA_ERROR_NOT_SUPPORTED"): (
        "this GPU or driver does not offer fabric handles (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED = 0)",
        "fabric handles need a Hopper or newer GPU with an R530+ driver on an NVLink-domain system; on one node "
        "share with POSIX fds, as vmmtui does by default",
    ),
    ("cuMemPoolExportToShareableHandle", "*"): (
        "the pool was created without a shareable handle type (CUmemPoolProps.handleTypes = "
        "CU_MEM_HANDLE_TYPE_NONE, as in a zeroed struct or the device's default pool): it is not IPC capable",
        "create the pool with handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (cuda.core: "
        "DeviceMemoryResource(ipc_enabled=True)); the device's default pool can never be exported",
    ),
    ("cuMemPoolImportPointer", "*"): (
        "the export data does not name a live allocation of the imported pool (freed by the exporter, or "
        "from another pool)",
        "import the pointer while the exporter keeps it (the ACK orders it), from the pool it was exported with",
    ),
    ("cuMemPoolCreate", "CUDA_ERROR_NOT_SUPPORTED"): (
        "this GPU or driver has no stream-ordered memory pools, or none with POSIX-fd handles",
        "check MEMORY_POOLS_SUPPORTED with `vmmtui doctor` (CUDA 11.2+), or use --mechanism vmm",
    ),
    ("pidfd_getfd (seccomp)", "EPERM"): (
        "this process runs under a seccomp filter that refuses pidfd_getfd, as Docker's default profile "
        "does for a container without CAP_SYS_PTRACE (moby#45622): the bare 'Operation not permitted' of "
        "PyTorch's expandable segments (pytorch#165685) and UCX cuda_ipc",
        "run the container with --cap-add SYS_PTRACE, or a seccomp profile that allows pidfd_getfd, or "
        "send the fd over a Unix socket with SCM_RIGHTS (--transport scm-rights), which seccomp allows",
    ),
    ("pidfd_getfd (Yama)", "EPERM"): (
        "Yama's ptrace_scope lets only an ancestor (or a pid named with prctl(PR_SET_PTRACER)) take another "
        "process's fds, and the producer is not this consumer's ancestor (flashinfer moved to SCM_RIGHTS "
        "for this)",
        "have the producer call prctl(PR_SET_PTRACER, consumer_pid) before it sends (vmmtui's producer "
        "does), or set kernel.yama.ptrace_scope=0, or give CAP_SYS_PTRACE, or use SCM_RIGHTS",
    ),
    ("pidfd_getfd", "EPERM"): (
        "pidfd_getfd needs ptrace access (PTRACE_MODE_ATTACH_REALCREDS) to the producer: another user, "
        "a non-dumpable process, a seccomp filter or an LSM refused it",
        "run both as the same user with CAP_SYS_PTRACE where needed, or send the fd with SCM_RIGHTS "
        "(--transport scm-rights), which needs no ptrace access",
    ),
    ("pidfd_getfd", "EBADF"): (
        "the producer has no fd of that number (it closed it, or the number on the wire is wrong)",
        "keep the exported fd open until every consumer has taken it (the ACK orders it)",
    ),
    ("pidfd_getfd", "ESRCH"): (
        "the producer exited before the consumer took its fd",
        "keep the producer alive until the consumer has imported (wait for its ACK)",
    ),
    ("pidfd_open", "ESRCH"): (
        "no process has that pid here: the producer exited, or the pid is from another PID namespace",
        "keep the producer alive until the consumer has imported; across PID namespaces use SCM_RIGHTS",
    ),
    ("pidfd_open (other PID namespace)", "ESRCH"): (
        "pids do not cross PID namespaces: the producer's pid names nobody in the consumer's namespace "
        "(a container with its own PID namespace; ucx#11978, vllm PR #55906)",
        "share the PID namespace (docker --pid=host or --pid=container:ID, Kubernetes "
        "shareProcessNamespace: true), or send the fd with SCM_RIGHTS, which crosses PID namespaces",
    ),
    ("pidfd_open (other PID namespace)", "PIDFD_WRONG_PROCESS"): (
        "pids do not cross PID namespaces: the producer's pid names another process in the consumer's "
        "namespace, and pidfd_getfd would take that process's fd",
        "share the PID namespace (docker --pid=host), or send the fd with SCM_RIGHTS",
    ),
    ("unshare(CLONE_NEWPID)", "UNAVAILABLE"): (
        "this host does not let an unprivileged process make a PID namespace (user namespaces are off, or "
        "a seccomp or AppArmor profile forbids them)",
        "run the scenario where `unshare --user --pid --fork true` works, or as root",
    ),
    ("recvmsg", "SIZE_MISMATCH"): (
        "the producer claimed an allocation of another size than this consumer was asked to share (its "
        "--size rounded to the granularity); importing, mapping or reading it is refused",
        "run producer and consumer with the same --size (both sides the same vmmtui version)",
    ),
    ("cuMemMap (imported)", "SIZE_MISMATCH"): (
        "the driver refused to map the claimed size of the imported allocation at offset 0: the allocation "
        "that arrived is smaller than the producer claimed (the code is the driver's: INVALID_VALUE, "
        "NOT_SUPPORTED or OUT_OF_MEMORY, depending on the driver)",
        "nothing was mapped; the producer must send the size it allocated (both sides the same vmmtui version)",
    ),
    ("cuMemFree", "CUDA_ERROR_INVALID_VALUE"): (
        "cuMemFree only frees cuMemAlloc memory; an imported VMM mapping is not one",
        "cuMemUnmap, cuMemAddressFree, then cuMemRelease the imported handle",
    ),
}


#: what to do about a received fd held until exit, by what the fd is (``AttachKind``'s memory
#: values, and "" for a file whose kind was not seen): the advice follows the fd, not the program.
#: A socket, a pipe or an eventfd held until exit carries no memory: a fact, with no fix
#: (``fd-closed-by-exit``)
CLOSE_FIXES = {
    "gpu": (
        "close the fd once it is imported (cuMemImportFromShareableHandle keeps its own reference; "
        "also when the import fails), and before exit"
    ),
    "memfd": (
        "close the fd once it is mapped (the mapping keeps the memory; munmap frees it), or once "
        "done with it"
    ),
    "shm": (
        "close the fd once it is mapped (the mapping keeps the memory; munmap frees it), or once "
        "done with it"
    ),
    "dmabuf": "close the fd once the buffer is imported or mapped (that keeps its own reference)",
    "": (
        "close every fd you receive once done with it: the sender's close leaves your copy open, "
        "and only your close or your exit ends it"
    ),
}


def close_fix(kind: str) -> str:
    """The fix for a received fd never closed, for an fd of ``kind`` (see ``CLOSE_FIXES``)."""
    return CLOSE_FIXES.get(kind, CLOSE_FIXES[""])


def explain(code: str, call: str = "") -> tuple[str, str]:
    """(cause, fix) for an error code from ``call``, with a generic answer for unknown ones."""
    for key in ((call, code), (call, "*")):
        if key in BY_CALL:
            return BY_CALL[key]
    return TABLE.get(code, ("unexpected error", "see the message; report it if it persists"))


def known(code: str, call: str = "") -> bool:
    """Whether today's tables word ``code`` from ``call`` (an unknown one gets the generic words)."""
    return (call, code) in BY_CALL or (call, "*") in BY_CALL or code in TABLE


def worded(f: Failure) -> tuple[str, str]:
    """(cause, fix) of a failure as drawn: today's words for a code the tables know; for one
    they do not, the words an older vmmtui recorded with it, or the generic answer."""
    if known(f.code, f.call) or not (f.cause or f.fix):
        return explain(f.code, f.call)
    return f.cause, f.fix


def said(f: Failure) -> str:
    """What the failed call or check found, in our words: an FD_LEAK's fds as
    ``/proc/PID/fd still has fd 38 → /dev/nvidiactl after cleanup``; any other failure's own
    message (the system's, or the facts of our check)."""
    if f.code == "FD_LEAK" and f.fds:
        shown = ", ".join(f"fd {fd} → {target}" for fd, target in sorted(f.fds.items()))
        return f"{f.message} still has {shown} after cleanup"
    return f.message


def facts(f: Failure) -> str:
    """``cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)``: the failure on one line, its
    message in our words (``said``)."""
    message = said(f)
    return f"{f.call}: {f.code}" + (f" ({message})" if message and message != f.code else "")


def one_line(f: Failure) -> str:
    """The failure, its cause and its fix on one line (a notice, a report's error column)."""
    cause, fix = worded(f)
    return f"{facts(f)} - {cause}; fix: {fix}"


def with_words(text: str, f: Failure | None) -> str:
    """A line of facts that a failure explains (a session that could not start), with the
    failure's cause and fix after it; the line as it is when no failure is its reason."""
    if f is None:
        return text
    cause, fix = worded(f)
    return f"{text} - {cause}; fix: {fix}"
