"""Words for the model's values that every renderer of programs shares (the panel, the verdicts,
the text lines): one wording of each."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from vmmtui.model.ends import End
from vmmtui.model.findings import Proof, Tally
from vmmtui.stream.observed import SocketEnd

if TYPE_CHECKING:
    from vmmtui.view.programs import Via

#: CU_MEM_HANDLE_TYPE_* bits
HANDLE_TYPES = {1: "posix-fd", 2: "win32", 4: "win32-kmt", 8: "fabric"}

#: what proved a share or an import, as the verdicts say it
PROOF_WORDS = {
    Proof.STRUCT_FILE: "the kernel's struct file",
    Proof.KCMP: "kcmp (one open file description)",
    Proof.HANDLE_BYTES: "the 64 IPC handle bytes",
    Proof.EXPORT_DATA: "the pool's 64 export bytes",
    Proof.NONE: "nothing (the other side was not traced)",
}


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def end_words(end: End | None) -> str:
    """``killed by SIGKILL``, ``exited with code 1``, or ``exited`` when how is not known."""
    if end is None:
        return "exited"
    if end.signal:
        return f"killed by {signal_name(end.signal)}"
    return f"exited with code {end.code}"


def ended_words(end: End | None) -> str:
    """The same, as the verb of a sentence: ``was killed by SIGKILL``, ``exited with code 1``."""
    words = end_words(end)
    return f"was {words}" if words.startswith("killed") else words


def nothing_wrong_words(polled: bool, at_attach: int) -> str:
    """The verdicts' head where nothing is to look at: polling sees only what is there at each
    poll, and memory found held at attach came there unseen (who made it, how it came), so
    neither is "nothing wrong found"."""
    if at_attach:
        what = "polling can see wrong" if polled else "wrong seen"
        return f" · nothing {what} since attach · {at_attach} held at attach, how it came unseen"
    return " · nothing polling can see wrong" if polled else " · nothing wrong found"


def proven_words(t: Tally) -> str:
    """``3 shared/imported, proven by the kernel's struct file (2), the 64 IPC handle bytes (1)``."""
    head = f"{t.good} shared/imported"
    if not t.proven_by:
        return head
    if len(t.proven_by) == 1:
        return f"{head}, proven by {PROOF_WORDS.get(Proof(next(iter(t.proven_by))), '?')}"
    parts = [
        f"{PROOF_WORDS.get(Proof(proof), '?')} ({n})"
        for proof, n in sorted(t.proven_by.items(), key=lambda kv: -kv[1])
    ]
    return f"{head}, proven by {', '.join(parts)}"


def road_words(road: str, exported_as: str, imported_as: str) -> str:
    """``road scm-rights, posix-fd → posix-fd``: how a share travelled and what it was at each
    end (a road not seen: ``road not seen``)."""
    ends = f", {exported_as or '?'} → {imported_as or '?'}" if exported_as or imported_as else ""
    return f"road {road or 'not seen'}{ends}"


def roads_words(counts: dict[str, int]) -> str:
    """``roads: scm-rights 3, legacy-ipc 1`` (most first); "" when none."""
    if not counts:
        return ""
    parts = [
        f"{road or 'not seen'} {n}" for road, n in sorted(counts.items(), key=lambda kv: -kv[1])
    ]
    return "roads: " + ", ".join(parts)


def handle_type_names(bits: int) -> list[str]:
    return [name for bit, name in HANDLE_TYPES.items() if bits & bit] or ["none"]


def via_words(via: Via) -> str:
    """How something travelled, as the wire says it: a socket in the text's words, the pidfd it
    was taken through, the first bytes of the handle that named it, else the call's name."""
    from vmmtui.stream.names import shown
    from vmmtui.view.programs import HandleBytes, ThroughPidfd

    if isinstance(via, SocketEnd):
        return shown(socket_words(via), 80)
    if isinstance(via, ThroughPidfd):
        return f"pidfd_getfd through pidfd {via.pidfd}"
    if isinstance(via, HandleBytes):
        return f"64 bytes {via.ipc[:16]}…"
    return via


def socket_words(s: SocketEnd) -> str:
    if s.family != "unix":
        return f"a {s.family} socket"
    name = f" {s.name}" if s.name else ""
    return f"unix socket{name} (inode {s.ino}{f', peer {s.peer_ino}' if s.peer_ino else ''})"
