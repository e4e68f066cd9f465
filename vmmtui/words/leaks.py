"""A leak polling found, in words: what it is, why it counts, and what to do.

``trace/procfs/leaks.py`` finds a leak as facts (``Leak``: the holder, the fd and its target,
the peers that exited, how polling saw the fd come, a file's path); the sentences are made here,
where it is drawn, and say where /proc cannot tell (a GPU fd's mapping is invisible in
/proc/PID/maps). A leak an older vmmtui wrote in words (``what`` set) is drawn in those. An fd's
fix that follows from its kind is ``troubleshooting.close_fix``'s, added where it is drawn.
"""

from __future__ import annotations

from vmmtui.stream.events import Leak, LeakKind
from vmmtui.stream.names import shown

#: why a shared fd's origin is not known, by FdOpened.how
ORIGIN_UNSEEN = {
    "present": "it was found at attach, so which process made it and which received it was not seen",
    "unknown": "it appeared in both processes within one poll, so which made it was not seen",
}


def _who(name: str, pid: int | None) -> str:
    return f"{shown(name or '?')} ({pid})"


def _peers(e: Leak) -> str:
    return ", ".join(_who(name, pid) for pid, name in sorted(e.peers.items()))


def _unseen(e: Leak) -> str:
    return ORIGIN_UNSEEN.get(e.how, "which process made it was not seen")


def said(e: Leak) -> tuple[str, str, str]:
    """(what, detail, fix) of a leak; its fix "" where it follows from the fd's kind."""
    if e.what:  # an older vmmtui's words
        return e.what, e.detail, e.fix
    if e.pins:  # a claim polling made from the mappings (``trace/procfs/mappings.py``)
        from vmmtui.words.polling import mapped_words

        return mapped_words(e)
    fd = f"{_who(e.name, e.pid)} fd {e.fd} → {shown(e.target)}"
    path = shown(e.target)
    match e.kind:
        case LeakKind.FD_AFTER_PEER:
            seen = (
                "not mapped any more (/proc/PID/maps)"
                if e.memory != "gpu"
                else "whether it is still mapped cannot be seen from /proc for GPU memory"
            )
            return (
                fd,
                f"still open after every process it shared with exited ({_peers(e)}); {seen}",
                "",
            )
        case LeakKind.POSSIBLE_FD_AFTER_PEER if e.how in ("arrived", "inherited"):
            seen = (
                "not mapped any more (/proc/PID/maps)"
                if e.memory != "gpu"
                else "whether it is still mapped cannot be seen from /proc for GPU memory"
            )
            return (
                fd,
                f"still open at this poll after every process it shared with exited "
                f"({_peers(e)}); {seen}; a close between two polls is not seen",
                "",
            )
        case LeakKind.POSSIBLE_FD_AFTER_PEER:
            return (
                fd,
                "still open, not mapped any more (/proc/PID/maps), after every process it was "
                f"shared with exited ({_peers(e)}); {_unseen(e)}: a leak if it was received",
                "",
            )
        case LeakKind.POSSIBLE_HELD_UNTIL_EXIT if e.how == "opened":
            return (
                fd,
                f"appeared at {e.appeared:.2f} s, no longer mapped, and still open at the last scan "
                "before the process exited: only its exit closed it. Polling cannot tell whether "
                "this process made it or received it (it sees no sendmsg or recvmsg, and no other "
                "process held it at a poll); received, it is a leak (trace as root, with eBPF, to "
                "know)",
                "",
            )
        case LeakKind.POSSIBLE_HELD_UNTIL_EXIT if e.how == "arrived":
            src = f"from {_who(e.source_name, e.source)} " if e.source is not None else ""
            return (
                fd,
                f"received {src}at {e.appeared:.2f} s, not mapped, and still open when the "
                "process was last read before a poll found it gone: its exit closed it, unless "
                "a close came after that read (polling does not see the close)",
                "",
            )
        case LeakKind.POSSIBLE_HELD_UNTIL_EXIT:
            return (
                fd,
                "kept after every process it was shared with exited, and still open at the last "
                f"scan before this one exited; {_unseen(e)}",
                "",
            )
        case LeakKind.HELD_UNTIL_EXIT:
            src = f"from {_who(e.source_name, e.source)}" if e.source is not None else ""
            return (
                fd,
                f"received {src} at {e.appeared:.2f} s, no longer mapped, and still open at the last "
                "scan before the process exited: only its exit closed it",
                "",
            )
        case LeakKind.GPU_MEMORY_AFTER_PEER:
            return (
                f"{_who(e.name, e.pid)} GPU memory {e.mib} MiB",
                "this process imported GPU memory from processes that have all exited, and NVML "
                "still charges it memory; an import keeps the exporter's allocation alive after the "
                "exporter died, and NVML may show it under no process at all",
                "release (cuMemRelease / cuIpcCloseMemHandle) what a peer imported when it dies; "
                "watch for PEER_CLOSED on the connection",
            )
        case LeakKind.SHM_FILE if e.how == "torch":
            return (
                path,
                f"PyTorch's refcount file of process {e.pid}, which is dead",
                f"rm {path} (PyTorch's file_descriptor sharing strategy cleans it when its "
                "processes exit normally)",
            )
        case LeakKind.SHM_FILE:
            return (
                path,
                "created while watched, left after every process exited and held or mapped by no "
                "process",
                f"shm_unlink the name when done (rm {path})",
            )
        case LeakKind.SOCKET_FILE:
            return (
                path,
                "a socket file no live socket is bound to: its owner died or closed without "
                "unlinking it",
                f"unlink it (rm {path}); bind after unlinking stale paths, or use abstract names",
            )
    return fd if e.fd >= 0 else path, str(e.kind), ""
