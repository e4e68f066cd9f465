"""A recording made when failures carried their cause and fix as sentences still replays, in
today's words: the failure is worded where it is drawn, from its code and call; the words the
old file carries are read only for a code today's tables do not know."""

from vmmtui.record.recording import in_our_words
from vmmtui.stream.events import SessionFailed, StepDone
from vmmtui.stream.failures import Failure
from vmmtui.stream.state import StepReport, WorkerState
from vmmtui.words import narration
from vmmtui.words.troubleshooting import explain, said

OOM = "CUDA_ERROR_OUT_OF_MEMORY"


def _old(code: str = OOM) -> Failure:
    """A failure as an older vmmtui wrote it: its cause and fix in the words of that day."""
    return Failure(code, "cuMemCreate", "out of memory", "the cause then", "the fix then")


def test_an_old_failure_is_drawn_in_today_s_words_unless_its_code_is_unknown_now():
    lines = [t.plain for t in narration.failed(SessionFailed("producer", "create", _old()))]
    cause, fix = explain(OOM, "cuMemCreate")
    assert lines[1:] == [f"  cause: {cause}", f"  fix:   {fix}"]
    assert "then" not in "\n".join(lines)
    # a code today's tables no longer know keeps the words it was recorded with
    lines = [t.plain for t in narration.failed(SessionFailed("producer", "create", _old("GONE")))]
    assert lines[1:] == ["  cause: the cause then", "  fix:   the fix then"]


def test_an_old_worker_log_line_keeps_its_facts_and_drops_the_old_words():
    old = _old()
    report = StepReport(
        "producer",
        "create",
        False,
        1,
        WorkerState("producer", 1, "cuda", "vmm", "producer-writes", 1 << 20, "/tmp/s"),
        log=[f"ERROR {old.one_line()} - {old.cause}; fix: {old.fix}", "other line"],
        failure=old,
    )
    read = in_our_words(StepDone(1, report, 2, 1))
    assert isinstance(read, StepDone)
    assert read.report.log == [
        "ERROR cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)",
        "other line",
    ]
    assert read.report.failure == old  # the facts as recorded; worded where drawn


def test_a_replay_keeps_an_old_failure_s_facts_and_leaves_its_words_to_today_s_tables():
    from vmmtui.pipeline.replay import facts_only

    read = facts_only(SessionFailed("producer", "create", _old()))
    assert isinstance(read, SessionFailed)
    assert read.failure == Failure(OOM, "cuMemCreate", "out of memory")
    gone = facts_only(SessionFailed("producer", "create", _old("GONE")))
    assert isinstance(gone, SessionFailed) and gone.failure == _old("GONE")


def test_an_old_fd_leak_gets_its_fds_back_as_facts_and_reads_as_it_did():
    """Before a leak's fds were facts, FD_LEAK carried them only in its sentence: read from such a
    recording, the failure has them as ``fds`` (the screen marks them ✗ from those) and is worded
    as it was; a leak this version wrote is left as it is."""
    sentence = "/proc/1985/fd still has fd 38 → /dev/nvidiactl, fd 40 → /memfd:a, b after cleanup"
    old = SessionFailed("consumer", "cleanup", Failure("FD_LEAK", "consumer cleanup", sentence))
    read = in_our_words(old)
    assert isinstance(read, SessionFailed)
    assert read.failure.fds == {38: "/dev/nvidiactl", 40: "/memfd:a, b"}
    assert read.failure.message == "/proc/1985/fd" and said(read.failure) == sentence
    assert in_our_words(read) == read
    other = SessionFailed("producer", "create", _old())
    assert in_our_words(other) is other
