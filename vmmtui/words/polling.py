"""Polling's claims about memory kept as a mapping, in words (``trace/procfs/mappings.py`` says
them as a kind and its facts: the holder, the peer, the pins and their bytes, a growth's trail, a
hold's start and now). Every one is possible: polling reads /proc at each poll, never the calls
between two polls."""

from __future__ import annotations

from vmmtui.stream.events import Leak, LeakKind, MappingSeen, MappingVia
from vmmtui.stream.sizes import format_size

#: what every such claim says of itself
UNSEEN_BETWEEN = (
    "polling reads /proc/PID/maps and the fd table at each poll: a map, an munmap or a close "
    "between two polls, or after the last read before an exit, is not seen"
)
#: how polling told where a mapping came from
VIA = {
    MappingVia.HELD_BEFORE: "the other held the same memory at the poll before, and this one did not",
    MappingVia.PARENT: "its parent held it when it was first seen",
    MappingVia.FIRST_POLL: "held by both at the first poll",
    MappingVia.TOGETHER: "both held it when first seen together: which came first was not seen",
}


def via_words(e: MappingSeen) -> str:
    if e.via.startswith("fd:"):
        return f"mapped from fd {e.via[3:]}"
    return VIA.get(e.via, e.via)  # type: ignore[call-overload]


def _of(peer: int | None) -> str:
    if not peer:
        return "memory whose origin no poll saw (made here, or received over its Unix socket)"
    return f"pid {peer}'s memory"


def _pieces(e: Leak) -> str:
    size = f" ({format_size(e.size)})" if e.size else ""
    return f"{e.pins} piece{'s' if e.pins != 1 else ''} of {_of(e.peer)}{size}"


def mapped_words(e: Leak) -> tuple[str, str, str]:
    """A claim polling made from the mappings, from its facts: what, detail and fix."""
    who = f"pid {e.pid}"
    if e.kind == LeakKind.POSSIBLE_GROWTH:
        trail = " → ".join(str(n) for n in e.trail)
        return (
            f"{who} pins {_pieces(e)}",
            f"its pins at the polls where they rose: {trail}, none released, over "
            f"{e.seconds:.2f} s: a loop that keeps what it is sent, as the polls saw it (fds and "
            f"mappings; {UNSEEN_BETWEEN})",
            "release each piece once used: munmap its mapping and close its fd",
        )
    if e.kind == LeakKind.POSSIBLE_HELD_AFTER_EXPORTER_DIED:
        held = (e.ktime - e.since) / 1e9 if e.ktime >= e.since else 0.0
        return (
            f"{who} maps {_pieces(e)}",
            f"still mapped {held:.2f} s after a poll found pid {e.peer}, which it came from, "
            f"gone: the memory lives as long as this mapping ({UNSEEN_BETWEEN})",
            "munmap what a peer sent when the peer is gone",
        )
    return (
        f"{who} mapped {_pieces(e)}",
        "still mapped when it was last read before a poll found it gone: its exit unmapped "
        f"them, as far as polling can tell ({UNSEEN_BETWEEN})",
        "munmap each piece once used",
    )
