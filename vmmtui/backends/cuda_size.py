"""How large is an imported CUDA allocation? What the consumer can learn before it maps the claimed size.

What the driver can and cannot tell about an allocation imported from an fd:

- ``cuMemGetAllocationPropertiesFromHandle`` returns its ``CUmemAllocationProp``: type, location (the
  device), handle types, flags. There is no size in it, and no driver call returns the size of a
  generic allocation handle.
- ``cuMemGetAllocationGranularity`` on those properties gives the granularity that every mapping's
  size and offset must be a multiple of; ``cuDeviceTotalMem`` bounds any allocation on that device.
- ``cuMemMap(ptr, size, offset=0, handle)`` requires ``offset + size`` to lie within the allocation
  and refuses anything larger. The code it refuses with depends on the driver: INVALID_VALUE on some,
  NOT_SUPPORTED on the H100's 580 driver, OUT_OF_MEMORY seen elsewhere.

So this check is cheap (a few driver queries, no mapping): it refuses a claim that is not a positive
multiple of the allocation's granularity or larger than its device, and reports the granularity so
that the consumer can hold the producer's to it. The mapping itself is the last check: the consumer's
map step maps the claimed size once, for real, and any refusal of that map is SIZE_MISMATCH with
the driver's code (``SizeCheck.by_map``). An earlier version probed with a throw-away reservation
and mapping of the claimed size, which cost 2 ms on every share and misread NOT_SUPPORTED as a
missing capability.
"""

from __future__ import annotations

from typing import Any, Protocol

from vmmtui.backends.base import CallLog, SizeCheck
from vmmtui.backends.errors import cu

SOURCE = "driver cuMemMap (the map step)"


class CudaBackend(Protocol):
    """What the check uses of vmmtui.backends.cuda.CudaBackend (not imported: cuda imports this module)."""

    _handles: dict[int, Any]
    calls: CallLog

    def call(self, name: str, fn: Any, *args: Any, show: dict[str, Any] | None = None) -> Any: ...


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
    check = SizeCheck(claimed, None, SOURCE, granularity=gran, by_map=True)
    if claimed <= 0 or claimed % gran:
        check.source = "driver cuMemGetAllocationGranularity"
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
