"""The host-staged copy: what sharing costs without IPC, for ``vmmtui bench`` to set beside it.

Device → pinned host buffer → a Unix stream socket → the other process's pinned buffer → its
device, in 64 MiB chunks, then the same verify kernel. This is what a program does when it cannot
share the allocation: every byte crosses PCIe twice and the socket once. The copies are not
overlapped with the socket (one pinned buffer a side), as in the simplest correct program.

``python -m vmmtui.bench.staged --fd N --size S --device D --repeat R`` is the receiving process.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

from vmmtui.backends.cuda import CudaBackend, cu

CHUNK_BYTES = 64 << 20


@dataclass
class StagedResult:
    size: int
    seconds: list[float]
    verified: bool
    detail: str = ""


class _Pinned:
    """A page-locked host buffer (cuMemHostAlloc) seen as a writable memoryview."""

    def __init__(self, backend: CudaBackend, size: int):
        self.b = backend
        self.ptr = int(
            backend.call("cuMemHostAlloc", cu.cuMemHostAlloc, size, 0, show={"bytesize": size})
        )
        self.view = memoryview((ctypes.c_char * size).from_address(self.ptr)).cast("B")

    def close(self) -> None:
        self.view.release()
        self.b.call("cuMemFreeHost", cu.cuMemFreeHost, self.ptr)


def _copy(fn, *args) -> None:
    (err,) = fn(*args)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{fn.__name__}: {cu.CUresult(err).name}")


def _recv_exactly(sock: socket.socket, view: memoryview, n: int) -> None:
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n], n - got)
        if k == 0:
            raise ConnectionError("the sender closed the socket mid-transfer")
        got += k


def _receiver(sock: socket.socket, size: int, device: int, repeat: int) -> None:
    b = CudaBackend()
    b.init(device)
    b.load_kernels()
    dst = b.alloc(size)
    pinned = _Pinned(b, min(CHUNK_BYTES, size))
    try:
        sock.sendall(b"ready\n")
        for _ in range(repeat):
            for off in range(0, size, CHUNK_BYTES):
                n = min(CHUNK_BYTES, size - off)
                _recv_exactly(sock, pinned.view, n)
                _copy(cu.cuMemcpyHtoD, cu.CUdeviceptr(dst + off), pinned.ptr, n)
            v = b.loaded_kernels().verify(dst, size // 4)
            sock.sendall(json.dumps({"passed": v.passed, "detail": v.describe()}).encode() + b"\n")
            b.clear(dst, size)  # the next round must prove itself again
    finally:
        pinned.close()
        b.free(dst)
        b.shutdown()


def measure(size: int, device: int = 0, repeat: int = 3, timeout: float = 300.0) -> StagedResult:
    """Time ``repeat`` staged transfers of ``size`` bytes (from the first DtoH to the verified ACK)."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vmmtui.bench.staged",
            "--fd",
            str(child.fileno()),
            "--size",
            str(size),
            "--device",
            str(device),
            "--repeat",
            str(repeat),
        ],
        pass_fds=(child.fileno(),),
        env=env,
        stdin=subprocess.DEVNULL,
    )
    child.close()
    b = CudaBackend()
    seconds: list[float] = []
    verified, detail = True, ""
    try:
        b.init(device)
        b.load_kernels()
        src = b.alloc(size)
        b.fill(src, size, "device")
        pinned = _Pinned(b, min(CHUNK_BYTES, size))
        parent.settimeout(timeout)
        lines = parent.makefile("rb")
        if lines.readline().strip() != b"ready":
            raise RuntimeError("the receiving process did not start")
        for _ in range(repeat):
            t0 = time.perf_counter()
            for off in range(0, size, CHUNK_BYTES):
                n = min(CHUNK_BYTES, size - off)
                _copy(cu.cuMemcpyDtoH, pinned.ptr, cu.CUdeviceptr(src + off), n)
                parent.sendall(pinned.view[:n])
            ack = json.loads(lines.readline())
            seconds.append(time.perf_counter() - t0)
            verified &= bool(ack.get("passed"))
            detail = ack.get("detail", "")
        lines.close()
        pinned.close()
        b.free(src)
    finally:
        parent.close()
        b.shutdown()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return StagedResult(size, seconds, verified and proc.returncode == 0, detail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m vmmtui.bench.staged",
        description="The receiving side of a host-staged copy.",
    )
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1)
    a = p.parse_args(argv)
    with socket.socket(fileno=a.fd) as sock:
        _receiver(sock, a.size, a.device, a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
