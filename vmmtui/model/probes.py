"""Calls that fail by design: a program asking the driver whether a capability works here.

PyTorch's caching allocator (expandable segments) and NCCL ask for a fabric-handle allocation
(``cuMemCreate`` with ``CU_MEM_HANDLE_TYPE_FABRIC`` in ``requestedHandleTypes``) to learn whether
fabric handles work on this node; without an IMEX channel the driver answers
``CUDA_ERROR_NOT_PERMITTED`` (``CUDA_ERROR_NOT_SUPPORTED`` where the driver or GPU has none), and the
program falls back to POSIX fds. That answer is what the program asked for, not a problem: it is a
*probe*, with what it found. ``classify`` is the one place that decides (a pure function of the call,
the handle types requested, the result and what is known of the process); the words are
``vmmtui.words.trace``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum

from vmmtui.stream.observed import (
    CapabilityProbe,
    CudaCall,
    LedgerFinding,
    TraceFinished,
    base_name,
)

#: CUmemAllocationHandleType's fabric bit
FABRIC = 8
NOT_PERMITTED, NOT_SUPPORTED = 800, 801


class Capability(StrEnum):
    FABRIC_HANDLES = "fabric-handles"


class Found(StrEnum):
    """What a probe learnt."""

    #: NOT_PERMITTED: the process has no IMEX channel it may use (none seen, or not known)
    NO_IMEX_CHANNEL = "no-imex-channel"
    #: NOT_PERMITTED though the process has an IMEX channel: the IMEX daemon refused or is not up
    IMEX_REFUSED = "imex-refused"
    #: NOT_SUPPORTED: this driver or GPU has no fabric handles
    NOT_SUPPORTED = "not-supported"


@dataclass(frozen=True)
class Context:
    """What is known of the calling process beyond the call itself."""

    #: the process made a fabric-handle allocation before: a refusal now is a failure, no probe
    fabric_worked: bool = False
    #: the process can see an IMEX channel (/dev/nvidia-caps-imex-channels); None: not looked at
    imex_channel: bool | None = None


@dataclass(frozen=True)
class Probe:
    capability: Capability
    found: Found


def classify(
    func: str, handle_types: int, result: int, context: Context = Context()
) -> Probe | None:
    """The probe this call is, or None when its failure (if any) is a failure."""
    if base_name(func) != "cuMemCreate" or not handle_types & FABRIC or context.fabric_worked:
        return None
    if result == NOT_PERMITTED:
        found = Found.IMEX_REFUSED if context.imex_channel else Found.NO_IMEX_CHANNEL
        return Probe(Capability.FABRIC_HANDLES, found)
    if result == NOT_SUPPORTED:
        return Probe(Capability.FABRIC_HANDLES, Found.NOT_SUPPORTED)
    return None


def probe_of(e: CudaCall, context: Context = Context()) -> CapabilityProbe | None:
    """The event that says ``e`` was a probe (None: it was not one)."""
    p = classify(e.func, e.handle_types, e.result, context)
    if p is None:
        return None
    return CapabilityProbe(e.pid, e.func, str(p.capability), str(p.found), e.result, e.ktime)


def reclassified(events: Iterable) -> Iterator:
    """A recorded trace with each probe as a probe: recordings made before probes were told apart
    hold a ``refused`` finding right after the call; it is replaced by the probe (the call itself,
    the evidence, is kept as recorded), and the end's count of findings leaves it out."""
    last: CudaCall | None = None
    replaced = 0
    for e in events:
        if isinstance(e, CudaCall):
            last = e
        elif isinstance(e, TraceFinished) and replaced:
            yield replace(e, findings=max(0, e.findings - replaced))
            continue
        elif (
            isinstance(e, LedgerFinding)
            and e.kind == "refused"
            and last is not None
            and (last.pid, last.ktime) == (e.pid, e.ktime)
            and (probe := probe_of(last)) is not None
        ):
            replaced += 1
            yield probe
            continue
        yield e
