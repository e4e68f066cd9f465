"""The model's findings and ends: one kind, one proof, one count, one end, worded once."""

from __future__ import annotations

from vmmtui.model.ends import End
from vmmtui.model.findings import Proof
from vmmtui.model.ledger import Ledger
from vmmtui.model.policy import counted_as, tally
from vmmtui.stream.events import FdHolder, FdOpened, ProcessSeen, SharedFile
from vmmtui.stream.observed import CudaCall, LedgerFinding, ProcessExit
from vmmtui.view.programs import ProgramsView, fold_program_event
from vmmtui.words.findings import finding_words as said
from vmmtui.words.programs import end_words, proven_words
from vmmtui.words.status import status_words
from vmmtui.words.trace import call_words

A, B = 1000, 2000
IPC = "ab" * 64


def _fold(events):
    ledger, view, found = Ledger(), ProgramsView(), []
    for e in events:
        view = fold_program_event(view, e)
        for f in ledger.apply(e):
            found.append(f)
            view = fold_program_event(view, f)
    return view, found


def test_an_end_is_computed_once_and_worded_once():
    assert End.of_status(9) == End(None, 9) and End.of_status(5 << 8) == End(5)
    assert End.of_returncode(-9) == End(None, 9) and End.of_exit(None, "SIGKILL") == End(None, 9)
    assert (
        end_words(End(None, 9)) == "killed by SIGKILL" and end_words(End(3)) == "exited with code 3"
    )
    # the exporter killed by SIGKILL: its panel, its last call and the importer's verdict agree
    view, found = _fold(
        [
            CudaCall(A, A, 1, "cuIpcGetMemHandle", 0, ptr=0x7000, ipc=IPC),
            CudaCall(B, B, 2, "cuIpcOpenMemHandle", 0, ptr=0x9000, ipc=IPC),
            ProcessExit(A, A, 3, 9),
        ]
    )
    assert view.procs[A].end == End(None, 9)
    assert call_words(view.calls_of(A)[-1].event) == "exit: killed by SIGKILL"
    held = next(f for f in found if f.kind == "held-after-exporter-died")
    assert (
        f"pid {A} was killed by SIGKILL" in said(held).detail and "code 9" not in said(held).detail
    )


def test_each_finding_says_what_proves_it_and_the_verdicts_say_it():
    """Legacy IPC is matched by the 64 handle bytes, not by a struct file: the header says so."""
    view, found = _fold(
        [
            CudaCall(A, A, 1, "cuIpcGetMemHandle", 0, ptr=0x7000, ipc=IPC),
            CudaCall(B, B, 2, "cuIpcOpenMemHandle", 0, ptr=0x9000, ipc=IPC),
            CudaCall(B, B, 3, "cuIpcOpenMemHandle", 0, ptr=0xA000, ipc="cd" * 64),
        ]
    )
    assert [f.proof for f in found] == [Proof.HANDLE_BYTES, Proof.NONE]
    t = tally(counted_as(f.of) for f in view.finding_list())
    assert t.good == 2 and t.bad == 0 and t.total == 2
    words = proven_words(t)
    assert "struct file" not in words and "the 64 IPC handle bytes (1)" in words
    assert "not traced" in words


def test_a_memfd_polling_proves_shared_is_a_share_on_the_verdicts():
    """``watch`` of two processes holding one memfd: the log's ``SHARED memfd`` is a finding
    (kcmp), so the verdicts do not say "0 shared" beside it."""
    target = "/memfd:w (deleted)"
    view, found = _fold(
        [
            ProcessSeen(A, 1, "a", "", 0, 0.0),
            ProcessSeen(B, 1, "b", "", 0, 0.0),
            FdOpened(A, 4, target, "memfd", "present", 0.0),
            FdOpened(B, 5, target, "memfd", "arrived", 0.1, FdHolder(A, 4)),
            SharedFile("memfd", target, 1, 15, [FdHolder(A, 4), FdHolder(B, 5)]),
            SharedFile("memfd", target, 1, 15, [FdHolder(A, 4), FdHolder(B, 5)]),  # said again
        ]
    )
    assert [(f.kind, f.pid, f.peer, f.proof) for f in found] == [("shared", B, A, "kcmp")]
    assert tally(counted_as(f.of) for f in view.finding_list()).good == 1
    # one of a socket (not memory) is not a share of memory
    _, found = _fold([SharedFile("socket", "socket:[9]", 1, 9, [FdHolder(A, 3), FdHolder(B, 3)])])
    assert found == []


def test_a_finding_recorded_before_proofs_were_kept_is_proven_by_its_file():
    old = LedgerFinding("shared", B, file="857aceaad812", fd=3, peer_fd=4)
    assert Proof(old.proof or "") == Proof.NONE
    from vmmtui.model.findings import proof_of

    assert proof_of(old) == Proof.STRUCT_FILE
    assert proof_of(LedgerFinding("imported", B)) == Proof.NONE


def test_the_status_counts_polling_leaks_as_the_verdicts_do():
    """A leak polling found is a finding to look at: the status line says so, as the verdicts."""
    from vmmtui.stream.events import Leak, LeakKind
    from vmmtui.view import ScreenState, fold

    state = fold(
        [
            ProcessSeen(A, 1, "a", "", 0, 0.0),
            Leak(LeakKind.SHM_FILE, "/dev/shm/x left", A, "nobody holds it", "unlink it"),
        ],
        ScreenState.for_programs(),
    )
    assert status_words(state.status)["findings"] == "0 shared/imported · 1 to look at"
    assert state.programs is not None and state.programs.bad_findings == 1


def test_a_finding_holds_facts_and_no_words():
    """The words of a finding are made where it is drawn (``words.findings``), from its facts."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(LedgerFinding)}
    assert names.isdisjoint({"what", "detail", "fix", "cause"}), names
