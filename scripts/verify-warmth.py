"""Is the first verify of a freshly mapped range slower than the next? (cold GPU TLB vs launch cost)

    python scripts/verify-warmth.py [SIZE_MiB ...]

Maps a VMM allocation in this process, fills it with the kernel, then times the verify kernel
three times in a row (CUDA events) and a device copy of the same bytes, for each size.
"""

import sys

from vmmtui.backends.cuda import CudaBackend

b = CudaBackend()
b.init(0)
b.query()
b.load_kernels()
for mib in [int(a) for a in sys.argv[1:]] or [64, 256, 1024]:
    size = mib << 20
    h = b.create(size)
    va = b.reserve(size, b.info.granularity_min)
    b.map(va, size, h)
    b.set_access(va, size)
    b.fill(va, size, "device")
    fill_ms = b.kernels.last_ms
    times = []
    for _ in range(3):
        b.kernels.verify(va, size // 4)
        times.append(b.kernels.last_ms)
    copy = b.copy_bandwidth(size)
    print(
        f"{mib:>5} MiB: fill {fill_ms * 1e3:.0f} us; verify 1st {times[0] * 1e3:.0f} us "
        f"({size / times[0] / 1e6:.0f} GB/s), 2nd {times[1] * 1e3:.0f} us, 3rd {times[2] * 1e3:.0f} us "
        f"({size / times[2] / 1e6:.0f} GB/s); copy {copy:.0f} GB/s (read + write)"
    )
    b.unmap(va, size)
    b.free_range(va, size)
    b.release(h)
b.shutdown()
