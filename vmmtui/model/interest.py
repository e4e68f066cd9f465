"""Which calls of a program matter: the one rule behind the call timeline's frames, the programs
panel's call rows and the event log's lines, so that "call N" means the same call everywhere.

A call matters unless it is a ``close`` or a ``dup`` of an fd that never held anything of
interest (a ``dup2`` onto an fd of interest closes that one: it matters) (a Python program closes hundreds at its start). Which fds are of interest is the
ledger's to know (``Ledger.fds_of``: those a call made, received, took, exported, sent or
duplicated, and those polling, or a trace's frame 0, saw open); ``Ledger.matters`` asks this rule
of them. The rule is pure, so the programs panel asks it of the fds it shows too, and a test
holds both to the same fds (``tests/model/test_one_fold.py``).
"""

from __future__ import annotations

from collections.abc import Collection

from vmmtui.stream.observed import FdCloseCall, FdDuplicated, TraceCall


def closed_by(held: Collection[int], e: FdCloseCall) -> list[int]:
    """The fds of interest a ``close`` (or ``close_range``) names."""
    if e.call == "close_range":
        return sorted(fd for fd in held if e.fd <= fd <= e.last)
    return [e.fd] if e.fd in held else []


def matters(held: Collection[int], e: TraceCall) -> bool:
    """Whether a call of a process whose fds of interest are ``held`` matters."""
    if isinstance(e, FdCloseCall):
        return bool(closed_by(held, e))
    if isinstance(e, FdDuplicated):  # a copy of one, or a dup2 onto one (which closes it)
        return e.old in held or e.fd in held
    return True
