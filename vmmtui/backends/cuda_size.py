"""How large is an imported CUDA allocation? The consumer asks the driver before it maps the claimed size.

What the driver can and cannot tell about an allocation imported from an fd:

- ``cuMemGetAllocationPropertiesFromHandle`` returns its ``CUmemAllocationProp``: type, location (the
  device), handle types, flags. There is no size in it, and no driver call returns the size of a
  generic allocation handle.
- ``cuMemGetAllocationGranularity`` on those properties gives the granularity that every mapping's
  size and offset must be a multiple of; ``cuDeviceTotalMem`` bounds any allocation on that device.
- ``cuMemMap(ptr, size, offset=0, handle)`` requires ``offset + size`` to lie within the allocation
  and refuses anything larger with ``CUDA_ERROR_INVALID_VALUE``. A probe mapping of the claimed size
  (a multiple of the granularity, into a fresh reservation of that size, so every other argument is
  valid) that succeeds proves the allocation holds at least the claimed bytes; one that fails with
  INVALID_VALUE proves it holds fewer. On a refusal, probes of halving sizes find the largest
  mapping the driver accepts, which is the allocation's size as far as the driver lets anyone see.
- Nothing tells whether the allocation is *larger* than the claim: only the claimed bytes are mapped,
  which is safe. On a GPU a too-large mapping is refused by the driver rather than faulting later
  (unlike a short memfd, which is SIGBUS on first touch), so this check turns a confusing
  INVALID_VALUE at the map step into a clear SIZE_MISMATCH before anything is reserved for real.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from vmmtui.backends.base import Call, CallLog, SizeCheck
from vmmtui.backends.errors import cu, error_name, error_text
from vmmtui.troubleshooting import StepError, failure

PROBE = "driver cuMemMap probe"


class CudaBackend(Protocol):
    """What the check uses of vmmtui.backends.cuda.CudaBackend (not imported: cuda imports this module)."""

    _handles: dict[int, Any]
    calls: CallLog

    def call(self, name: str, fn: Any, *args: Any, show: dict[str, Any] | None = None) -> Any: ...
    def reserve(self, size: int, alignment: int) -> int: ...
    def unmap(self, va: int, size: int) -> None: ...
    def free_range(self, va: int, size: int) -> None: ...


def check_size(b: CudaBackend, handle: int, claimed: int) -> SizeCheck:
    """The driver's word on the imported allocation ``handle`` against the ``claimed`` size."""
    h = b._handles[handle]
    prop = b.call(
        "cuMemGetAllocationPropertiesFromHandle",
        cu.cuMemGetAllocationPropertiesFromHandle,
        h,
        show={"handle": hex(handle)},
    )
    gran = int(
        b.call(
            "cuMemGetAllocationGranularity",
            cu.cuMemGetAllocationGranularity,
            prop,
            cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            show={"option": "MINIMUM", "of": "the imported allocation"},
        )
    )
    check = SizeCheck(claimed, None, PROBE)
    if claimed <= 0 or claimed % gran:
        check.refuse(
            "SIZE_MISMATCH",
            f"claimed {claimed} bytes: not a positive multiple of the allocation's "
            f"granularity {gran}",
        )
        return check
    if prop.location.type == cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE:
        owner = int(prop.location.id)
        dev = b.call("cuDeviceGet", cu.cuDeviceGet, owner, show={"ordinal": owner})
        total = int(b.call("cuDeviceTotalMem", cu.cuDeviceTotalMem, dev, show={"dev": owner}))
        if claimed > total:
            check.source = "driver cuDeviceTotalMem"
            check.refuse(
                "SIZE_MISMATCH", f"claimed {claimed} bytes: more than device {owner} has ({total})"
            )
            return check
    va = b.reserve(claimed, gran)
    try:
        if _maps(b, va, claimed, h, handle):
            check.reported = claimed
            return check
        check.reported = _largest(b, va, claimed, gran, h, handle)
        found = (
            f"it accepts at most {check.reported}"
            if check.reported
            else "it accepts no smaller mapping either"
        )
        check.refuse(
            "SIZE_MISMATCH",
            f"claimed {claimed} bytes, but cuMemMap of that size at offset 0 is "
            f"CUDA_ERROR_INVALID_VALUE: the allocation is smaller ({found})",
        )
        return check
    finally:
        b.free_range(va, claimed)


def _maps(b: CudaBackend, va: int, size: int, h: Any, handle: int) -> bool:
    """Whether the driver maps ``size`` bytes of the allocation at offset 0 (the probe is unmapped at once)."""
    t0 = time.perf_counter_ns()
    (err,) = cu.cuMemMap(cu.CUdeviceptr(va), size, 0, h, 0)
    ok = err == cu.CUresult.CUDA_SUCCESS
    code = error_name(err)
    b.calls.add(
        Call(
            "cuMemMap",
            {
                "ptr": hex(va),
                "size": size,
                "offset": 0,
                "handle": hex(handle),
                "note": "size probe",
            },
            code,
            time.perf_counter_ns() - t0,
            ok=ok,
        )
    )
    if ok:
        b.unmap(va, size)
        return True
    if code != "CUDA_ERROR_INVALID_VALUE":
        raise StepError(failure(code, "cuMemMap (size probe)", error_text(err)))
    return False


def _largest(b: CudaBackend, va: int, claimed: int, gran: int, h: Any, handle: int) -> int | None:
    """The largest multiple of ``gran`` below ``claimed`` that the driver maps (bisection), or None."""
    lo, hi = (
        0,
        claimed // gran - 1,
    )  # in granules: lo is accepted (0: trivially), claimed was refused
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _maps(b, va, mid * gran, h, handle):
            lo = mid
        else:
            hi = mid - 1
    return lo * gran or None
