"""One wording per event: narration's functions, and that nothing else words the verdicts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.events_fixture import SAME
from vmmtui.stream.events import KcmpVerdict, Notice, WorkerExited
from vmmtui.words import narration

PKG = Path(__file__).resolve().parents[2] / "vmmtui"
#: the pre-redesign session module, gone once vmmtui/session/ lands (it still words kcmp itself)
OLD_SESSION = PKG / "session.py"


def verdict(consumer: str = "consumer", same: bool | None = True, fd: int = 5) -> KcmpVerdict:
    return KcmpVerdict(100, 5, 101, fd, same, SAME if same else "different files", consumer)


def sources() -> list[Path]:
    return [p for p in PKG.rglob("*.py") if p != OLD_SESSION]


def test_one_verdict_is_the_kernels_answer():
    assert narration.kcmp_verdict(verdict()).plain == f"producer fd 5 ≡ consumer fd 5: {SAME}"
    assert narration.kcmp_verdict(verdict(same=False)).plain.startswith(
        "producer fd 5 ≢ consumer fd 5"
    )
    assert narration.kcmp_verdict(verdict(same=None)).plain.startswith(
        "producer fd 5 ? consumer fd 5"
    )
    assert narration.kcmp_summary([verdict()]).plain == f"producer fd 5 ≡ consumer fd 5: {SAME}"


def test_a_verdict_on_fds_closed_since_is_said_in_the_past_with_when():
    assert (
        narration.kcmp_verdict(verdict(), past=True, step=21).plain
        == f"producer fd 5 ≡ consumer fd 5 were the {SAME} (at step 21)"
    )
    assert narration.kcmp_verdict(verdict(same=False), past=True).plain == (
        "producer fd 5 ≢ consumer fd 5 were different open file descriptions (before cleanup)"
    )
    assert (
        narration.kcmp_verdict(verdict(), True, 21, terse=True).plain
        == "producer fd 5 ≡ consumer fd 5 at step 21 (kcmp; closed)"
    )
    # kcmp would not say: nothing was claimed of the fds, then or now
    assert narration.kcmp_verdict(verdict(same=None), past=True).plain == (
        narration.kcmp_verdict(verdict(same=None)).plain
    )
    several = [verdict(f"consumer-{k}") for k in range(1, 4)]
    assert narration.kcmp_summary(several, past=True, step=7).plain == (
        "3/3 consumers' fds were the producer's open file description (at step 7)"
    )


def test_several_consumers_none_and_legacy():
    several = [verdict(f"consumer-{k}") for k in range(1, 5)]
    assert (
        narration.kcmp_summary(several).plain
        == "4/4 consumers' fds are the producer's open file description"
    )
    several[2] = verdict("consumer-3", same=False)
    text = narration.kcmp_summary(several)
    assert text.plain.startswith("3/4 ") and "red" in str(text.style)
    # a consumer that never got a verdict still counts when the session says how many there were
    assert narration.kcmp_summary(several[:3], consumers=4).plain.startswith("2/4 ")
    assert narration.kcmp_summary([]).plain == "not checked"
    assert narration.kcmp_summary([], "legacy").plain == (
        "no fd travelled (legacy IPC handle: 64 plain bytes), so there is nothing for kcmp to compare"
    )


def test_pair_note_names_the_other_side_for_numbered_consumers():
    v = verdict("consumer-3")
    assert narration.kcmp_pair_note(v, "consumer-3") == " ≡ producer 5"
    assert narration.kcmp_pair_note(v, "producer") == " ≡ consumer-3 5"
    assert narration.kcmp_pair_note(v, "consumer-2") == ""


def test_exits_and_role_colours():
    assert (
        narration.exited(WorkerExited("consumer-2", 7, None, "SIGKILL", False)).plain
        == "consumer-2 (pid 7) killed by SIGKILL"
    )
    assert (
        narration.exited(WorkerExited("producer", 7, 1, None, False)).plain
        == "producer (pid 7) exited with code 1"
    )
    assert (
        narration.role_style("consumer-2") == narration.role_style("consumer") == "medium_purple1"
    )
    assert narration.role_style("producer") == "cyan"


def test_events_hold_data_only():
    assert not hasattr(KcmpVerdict, "describe") and not hasattr(WorkerExited, "describe")


def test_verified_is_worded_only_in_narration():
    # the one-word verdicts as a renderer would spell them (not the scenarios' ``VERIFIED`` constant)
    pattern = re.compile(r"NOT VERIFIED|\]VERIFIED\[|[\"']VERIFIED[\"'] if")
    wording = [p.relative_to(PKG).as_posix() for p in sources() if pattern.search(p.read_text())]
    assert wording == ["words/narration.py"]


def test_several_consumers_kcmp_summary_is_worded_only_in_narration():
    wording = [
        p.relative_to(PKG).as_posix() for p in sources() if "consumers' fds" in p.read_text()
    ]
    assert wording == ["words/narration.py"]


def test_the_closing_text_is_true_to_the_plan():
    from vmmtui import scenarios
    from vmmtui.plan.steps import build_plan

    whole = narration.closing("vmm", build_plan())
    assert whole.endswith("every resource was released in reverse order.")
    dies = narration.closing("vmm", scenarios.get("producer-dies").plan())
    assert "reverse order." in dies and "every resource" not in dies
    assert "The producer ran no cleanup: the kernel released what it held" in dies
    assert narration.closing("legacy", build_plan()).startswith("The 64-byte IPC handle")


def test_closing_says_when_the_exporter_released_first_and_names_the_pool_road():
    from vmmtui import scenarios
    from vmmtui.plan.steps import build_plan
    from vmmtui.words import narration

    pins = narration.closing("vmm", scenarios.get("importer-pins").plan())
    assert "the producer released everything first" in pins and "reverse order" not in pins
    assert narration.closing("pool", build_plan("pool")).startswith("The pool's fd went")
    assert narration.closing("vmm", build_plan(), "pidfd").startswith("The consumer took")


@pytest.mark.parametrize(
    ("returncode", "signal", "end"),
    [
        (1, None, "exited with code 1"),
        (None, "SIGKILL", "killed by SIGKILL"),
        (0, None, "exited with code 0"),
    ],
)
def test_a_worker_s_end_and_a_traced_program_s_are_worded_by_one_function(returncode, signal, end):
    """A demo worker and a traced program that end alike are said alike: one function words an
    end (``words.programs.end_words``), in the log, the panel's state and a polled program's."""
    from vmmtui.model.ends import End
    from vmmtui.stream.events import ProcessGone
    from vmmtui.words.programs import end_words

    worker = WorkerExited("producer", 7, returncode, signal, False)
    assert end_words(End.of_exit(returncode, signal)) == end
    assert narration.exited(worker).plain == f"producer (pid 7) {end}"
    assert narration.exit_state(worker) == end
    gone = ProcessGone(7, "python3", 1.0, returncode, signal)
    assert narration.process_gone(gone).plain.endswith(f"python3 {end}")


def test_a_notice_about_a_failed_call_says_its_cause_and_fix_where_it_is_drawn():
    """A worker's cleanup that failed is a notice of facts carrying the failure; the words come
    from the tables when it is drawn, as a failed step's do."""
    from vmmtui.stream.events import Notice
    from vmmtui.stream.failures import failure
    from vmmtui.words.troubleshooting import explain

    f = failure("CUDA_ERROR_INVALID_VALUE", "cuMemRelease")
    e = Notice(f"producer cleanup: {f.one_line()}", f)
    cause, fix = explain(f.code, f.call)
    assert (
        narration.notice(e).plain == f"note: producer cleanup: {f.one_line()} - {cause}; fix: {fix}"
    )
    assert Notice.from_json(e.to_json()) == e
    assert narration.notice(Notice("plain")).plain == "note: plain"


def test_a_notice_travels_as_a_code_and_its_facts_and_is_worded_where_drawn():
    """The session's notices carry a code and facts, no sentence; words/notices.py words them
    (a scenario's explanation is today's catalogue's), a notice an older vmmtui wrote in words
    reads as it was, and a code this version does not know is shown as its facts."""
    from vmmtui import scenarios
    from vmmtui.stream.events import Event, NoticeCode
    from vmmtui.stream.failures import failure

    scenario = Notice(code=NoticeCode.SCENARIO, facts={"name": "leaked-fd"})
    assert Event.from_json(scenario.to_json()) == scenario and "close()" not in scenario.to_json()
    explanation = scenarios.get("leaked-fd").explanation
    assert narration.notice(scenario).plain == f"note: scenario leaked-fd: {explanation}"
    gone = Notice(code=NoticeCode.INTERRUPTED, facts={"role": "consumer", "step": ""})
    assert narration.notice(gone).plain.startswith("note: consumer's step was interrupted")
    cleanup = Notice(
        failure=failure("EBADF", "close"), code=NoticeCode.CLEANUP_FAILED, facts={"role": "x"}
    )
    assert narration.notice(cleanup).plain.startswith("note: x cleanup: close: EBADF - ")
    assert (
        narration.notice(Notice("an older vmmtui's words")).plain == "note: an older vmmtui's words"
    )
    assert narration.notice(Notice(code="from-a-newer-vmmtui", facts={"n": 2})).plain == (
        "note: from-a-newer-vmmtui: n 2"
    )
    legacy = {"role": "consumer", "before": 4, "after": 4, "via": "legacy"}
    assert narration.notice(Notice(code=NoticeCode.FD_DELTA, facts=legacy)).plain == (
        "note: consumer fd table (from /proc): 4 fds before receive, 4 after: no fd arrived: "
        "the IPC handle is 64 plain bytes"
    )
    taken = {**legacy, "after": 5, "via": "pidfd", "fd.7": "/memfd:x (deleted)"}
    assert narration.notice(Notice(code=NoticeCode.FD_DELTA, facts=taken)).plain.endswith(
        "4 fds before receive, 5 after: fd 7 → /memfd:x (deleted) appeared, taken with "
        "pidfd_getfd: no message carried it"
    )
    killed = {"role": "producer", "pid": 9, "signal": "SIGKILL", "when": "after export"}
    assert narration.notice(Notice(code=NoticeCode.SCENARIO_KILLED, facts=killed)).plain == (
        "note: scenario: producer pid 9 killed with SIGKILL after export"
    )
    hostile = Notice(code=NoticeCode.STALE_DIR_REMOVED, facts={})
    assert narration.notice(hostile).plain == "note: stale-dir-removed"
