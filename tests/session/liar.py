"""A producer that lies, for tests/session/test_hostile.py: a real process that listens like the producer,
accepts the consumer and sends it an fd whose real size is not the size it claims.

    python liar.py BACKEND PATH REAL CLAIMED [unsealed] [shrink] [sparse] [granularity=N] [pipe|regular]

memfd: a memfd of REAL bytes holding the pattern, sealed like vmmtui's producer seals it unless
``unsealed``; cuda: a cuMemCreate allocation of REAL bytes (rounded to the granularity), exported as
an fd. ``sparse``: the memfd is left unwritten (a sealed hole of REAL bytes costs no memory);
``granularity=N``: the granularity claimed beside the size. ``shrink``: once a line arrives on stdin
(the consumer has mapped), try ftruncate(fd, 0) and report the errno. ``pipe``, ``regular``: send a
pipe or a regular file instead. Prints one JSON line per event; cleans up everything it made.
"""

import errno
import fcntl
import json
import os
import sys

from vmmtui.backends.pattern import pattern
from vmmtui.stream.failures import StepError
from vmmtui.stream.values import Ack, AllocMessage
from vmmtui.wire import channel


def say(**event) -> None:
    print(json.dumps(event), flush=True)


def memfd(real: int, sealed: bool, sparse: bool) -> tuple[int, int, str, None]:
    fd = os.memfd_create("vmmtui-alloc", os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if sealed else 0))
    os.ftruncate(fd, real)
    if not sparse:
        os.pwrite(fd, pattern(0, real // 4).tobytes(), 0)
    if sealed:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL)
    return fd, os.sysconf("SC_PAGESIZE"), "CPU memory (memfd)", None


def not_memfd(kind: str, real: int) -> tuple[int, int, str, None]:
    """A pipe's read end, or a regular file of REAL bytes (no name), sent as if it were the memfd."""
    if kind == "pipe":
        r, w = os.pipe()
        os.close(w)
        fd = r
    else:
        fd = os.open(os.environ.get("TMPDIR", "/tmp"), os.O_TMPFILE | os.O_RDWR, 0o600)
        os.ftruncate(fd, real)
    return fd, os.sysconf("SC_PAGESIZE"), "CPU memory (memfd)", None


def cuda(real: int) -> tuple[int, int, str, object]:
    from vmmtui.backends.cuda import CudaBackend
    from vmmtui.stream.sizes import align_up

    b = CudaBackend()
    b.init(0)
    gran = b.query().granularity_min
    handle = b.create(align_up(real, gran))
    return b.export_fd(handle), gran, b.device_name, (b, handle)


def main(backend: str, path: str, real: int, claimed: int, opts: list[str]) -> int:
    other = next((o for o in opts if o in ("pipe", "regular")), None)
    if other:
        fd, gran, name, cu = not_memfd(other, real)
    elif backend == "memfd":
        fd, gran, name, cu = memfd(real, "unsealed" not in opts, "sparse" in opts)
    else:
        fd, gran, name, cu = cuda(real)
    for opt in opts:
        if opt.startswith("granularity="):
            gran = int(opt.split("=", 1)[1])
    listener = channel.listen(path)
    conn = None
    try:
        say(event="listening", pid=os.getpid(), granularity=gran)
        conn, cred = channel.accept(listener, None, 30)
        channel.send_message(
            conn, AllocMessage(claimed, claimed, gran, 0, name, backend, "vmm"), [fd]
        )
        say(event="sent", claimed=claimed, real=real, consumer=cred.pid)
        if "shrink" in opts:
            sys.stdin.readline()
            try:
                os.ftruncate(fd, 0)
                say(event="ftruncate", errno=0, size=os.fstat(fd).st_size)
            except OSError as exc:
                say(event="ftruncate", errno=errno.errorcode[exc.errno], size=os.fstat(fd).st_size)
        try:
            ack, _ = channel.receive_message(conn, 30, Ack)
            say(event="ack", verified=ack.verified)
        except StepError as exc:
            say(event="no ack", code=exc.failure.code)
    finally:
        if conn is not None:
            conn.close()
        listener.close()
        os.unlink(path)
        os.close(fd)
        if cu is not None:
            b, handle = cu
            b.release(handle)
            b.shutdown()
    say(event="done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]))
