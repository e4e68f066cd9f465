"""Words for the model's values that every renderer of programs shares (the panel, the verdicts,
the text lines): one wording of each."""

from __future__ import annotations

import signal

from vmmtui.model.ends import End
from vmmtui.model.findings import FindingKind, Proof, Tally
from vmmtui.model.handles import HandleFact
from vmmtui.stream.observed import LedgerFinding, SocketEnd

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


def socket_words(s: SocketEnd) -> str:
    if s.family != "unix":
        return f"a {s.family} socket"
    name = f" {s.name}" if s.name else ""
    return f"unix socket{name} (inode {s.ino}{f', peer {s.peer_ino}' if s.peer_ino else ''})"


# -- the refcount book's facts (model/handles.py), worded once ---------------------------------
_THING = {"allocation": "allocation", "ipc": "legacy IPC handle", "pool-ptr": "pool pointer"}


def _proved(f: HandleFact) -> str:
    if f.proof == Proof.STRUCT_FILE:
        return "the export's fd, matched to the import by the kernel's struct file"
    if f.proof == Proof.HANDLE_BYTES:
        return f"the 64 handle bytes {f.ipc[:16]}…" if f.ipc else "the handle bytes"
    if f.proof == Proof.EXPORT_DATA:
        return f"the 64 export bytes {f.ipc[:16]}…" if f.ipc else "the export data"
    return "the handle value the driver returned"


def _size(n: int) -> str:
    return f"{n} bytes" if n else "size not seen"


def handle_finding(f: HandleFact) -> LedgerFinding:
    """A fact of the refcount book as the ledger's finding: what, what proves it, the fix."""
    thing = _THING.get(str(f.thing), str(f.thing))
    kind = FindingKind(f.kind)
    if kind is FindingKind.OPENED_TWICE and f.refused:
        what = f"opened pid {f.peer}'s {thing} a second time while it maps it at {f.key:#x}"
        detail = (
            f"the driver refused the second cuIpcOpenMemHandle (CUDA_ERROR_ALREADY_MAPPED: one "
            f"open per handle per context; proved by {_proved(f)}, open since the first); "
            "code that opens per use and closes once leaks or fails here"
        )
        fix = (
            "keep one open per handle in the process and share its pointer (count the users, "
            "cuIpcCloseMemHandle when the last goes)"
        )
    elif kind is FindingKind.OPENED_TWICE:
        opens = ", ".join(f"{k:#x}" for k in f.opens)
        what = f"holds {len(f.opens)} opens of pid {f.peer}'s {thing} {f.exported:#x} ({opens})"
        detail = (
            f"opened {len(f.opens)} times, closed {f.closes} so far; proved by {_proved(f)}; "
            "each open is a reference the driver counts: one close leaves the memory pinned"
        )
        fix = (
            "open once and share the mapping within the process, or release every open "
            "(cuMemRelease / cuIpcCloseMemHandle once per open)"
        )
    elif kind is FindingKind.EXPORTED_NEVER_IMPORTED:
        what = f"exported {thing} {f.key:#x}, never imported"
        waited = f"no traced process opened it in {(f.ktime - f.since) / 1e9:.1f} s"
        if f.thing == "allocation":
            detail = (
                f"{waited} ({_size(f.size)}; proved by {_proved(f)} never seen at an import); "
                "the exported handle pins the memory as long as any copy of the fd lives"
            )
            fix = "close the exported fd (every copy sent) when no importer comes"
        else:
            detail = (
                f"{waited} ({_size(f.size)}; proved by {_proved(f)} never seen at an open): the "
                "bytes reached no traced importer (a lost handoff, or an importer not traced)"
            )
            fix = "check that the receiver got the 64 bytes and opened them (or trace it too)"
    elif kind is FindingKind.RELEASED_TWICE:
        call = "cuMemRelease" if f.thing == "allocation" else (
            "cuIpcCloseMemHandle" if f.thing == "ipc" else "cuMemFreeAsync"
        )  # fmt: skip
        what = f"{call}({f.key:#x}) a second time"
        detail = (
            f"the same {'handle' if f.thing == 'allocation' else 'pointer'} was released "
            f"{(f.ktime - f.since) / 1e6:.3f} ms earlier (proved by the handle value the driver "
            "returned and the first release's call)"
        )
        fix = "release each handle once: drop your reference after the first release"
    elif kind is FindingKind.FREED_WHILE_MAPPED:
        what = f"released its exported {thing} {f.key:#x} while pid {f.peer} holds it"
        detail = (
            f"pid {f.peer} holds {len(f.opens)} open{'s' if len(f.opens) != 1 else ''} or a "
            f"mapping ({_size(f.size)}; proved by {_proved(f)}): "
            + (
                "the memory stays pinned until it releases"
                if f.thing == "allocation"
                else "the importer's mapping now points at freed memory"
            )
        )
        fix = "wait for the importer's release (a message back) before freeing the export"
    elif kind is FindingKind.LEGACY_EXPORT_OF_VMM:
        what = f"cuIpcGetMemHandle({f.key:#x}) on memory mapped with cuMemMap"
        detail = (
            f"the pointer lies in the range mapped at {f.since:#x} from handle {f.exported:#x} "
            f"({_size(f.size)}): legacy IPC cannot export VMM memory "
            "(CUDA_ERROR_INVALID_VALUE)"
        )
        fix = (
            "export the allocation's handle as a POSIX fd (cuMemExportToShareableHandle, "
            "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) and send it over a Unix socket, or use "
            "torch's expandable-segments IPC"
        )
    elif kind is FindingKind.HELD_AFTER_EXPORTER_DIED:
        what = f"still maps pid {f.peer}'s memory at {f.key:#x}"
        detail = (
            f"pid {f.peer} (the exporter) exited; pid {f.pid} released its imported handle but its "
            f"mapping of allocation {f.exported:#x} ({_size(f.size)}; proved by {_proved(f)}) "
            "keeps the memory alive"
        )
        fix = "cuMemUnmap the range when the exporter goes (watch its pidfd or socket)"
    else:
        what, detail, fix = str(kind), "", ""
    return LedgerFinding(str(kind), f.pid, what, detail, fix, f.ktime, peer=f.peer,
                         proof=str(f.proof))  # fmt: skip
