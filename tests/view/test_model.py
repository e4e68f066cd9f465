"""The view model on its own: ``fold(events)`` and the per-frame states, no app (test_house keeps
vmmtui.view free of Textual)."""

from __future__ import annotations

from events_fixture import session_batches

from vmmtui.plan.steps import build_plan
from vmmtui.record import Timeline, gallery
from vmmtui.stream.events import FdCheck, FdClass, FdRow, FdSnapshot, StepStarted, WorkerExited
from vmmtui.view import FrameStates, ScreenState, fold, fold_one
from vmmtui.words import narration as say
from vmmtui.words.log import log_text
from vmmtui.words.status import status_words

PLAN = build_plan()


def events_upto(batches, role: str, step: str):
    out = []
    for batch in batches:
        out += batch
        if any(getattr(e, "step", None) == step and e.role == role for e in batch):
            return out
    raise AssertionError(f"no {role} {step}")


def test_fold_of_a_whole_session_has_every_part():
    batches = session_batches()
    state = fold([e for b in batches for e in b])
    assert state.started and state.backend == "memfd" and state.roles == ("producer", "consumer")
    assert state.verification is not None and state.verification.passed
    assert state.finished is not None and state.finished.verified
    assert state.closed is not None and state.closed.clean
    assert state.next_step is None and state.done
    assert state.steps == len(PLAN)
    producer = state.panel("producer")
    assert producer.results["cleanup"][0] and say.panel_state(producer) == "exited with code 0"
    assert producer.ended is not None and producer.ended.returncode == 0
    assert "verified" in say.wire_ack(state.wire.acks)
    # every fd kcmp compared has closed: its answer is told as one of the past
    assert status_words(state.status)["kcmp"].endswith("(kcmp; closed)")
    assert not any(s.open for s in state.wire.kcmps.values())
    assert state.log_len == len(state.log_lines()) > len(PLAN)
    assert log_text(state.log_lines()[-1]).plain.startswith("Closed cleanly")


def test_next_step_running_step_and_the_fd_table_of_each_step():
    batches = session_batches()
    export = events_upto(batches, "producer", "export")
    state = fold(export)
    assert state.next_step == PLAN[PLAN.index(("producer", "export")) + 1]
    exported = state.panel("producer").worker_state.exported_fd
    fds = state.panel("producer").fds
    assert exported in {r.fd for r in fds.rows}
    assert exported in state.panel("producer").fresh  # new at this step: highlighted
    nxt = state.next_step
    running = fold_one(state, StepStarted(state.steps, *nxt))
    assert say.panel_state(running.panel(nxt[0])) == f"running {nxt[1]}"
    assert state.panel(nxt[0]).running is None  # the state before is untouched


def test_a_fold_shares_the_parts_an_event_did_not_touch():
    batches = session_batches()
    state = fold(events_upto(batches, "consumer", "receive"))
    snap = state.panel("consumer").fds
    later = fold_one(state, FdSnapshot("producer", 1, "S", list(state.panel("producer").fds.rows)))
    assert later.panel("consumer") is state.panel("consumer") and later.wire is state.wire
    assert later.panel("consumer").fds is snap


def test_closed_fds_and_a_crash():
    state = fold(events_upto(session_batches(), "consumer", "receive"))
    rows = state.panel("consumer").fds.rows
    fewer = FdSnapshot("consumer", 1, "S", [r for r in rows if r.kind != "received"])
    after = fold_one(state, fewer)
    assert [r.kind for r in after.panel("consumer").closed] == ["received"]
    crashed = fold_one(after, WorkerExited("consumer", 1, None, "SIGKILL", False))
    assert crashed.crash is not None and crashed.next_step is not None
    closing = fold_one(after, WorkerExited("consumer", 1, 0, None, False), closing=True)
    assert closing.crash is None


def test_blank_after_keeps_the_log_in_a_new_era():
    state = fold([e for b in session_batches() for e in b])
    fresh = ScreenState.blank(after=state)
    assert fresh.era == state.era + 1 and fresh.log_len == state.log_len
    assert fresh.panel("producer").results == {} and fresh.verification is None


def test_states_per_frame_equal_a_fold_of_each_prefix_in_any_order():
    recording = gallery.resolve("cpu-memfd-1mib")
    timeline = Timeline(recording.events)
    frames = FrameStates(Timeline(recording.events))
    order = [*range(len(timeline) - 1, -1, -1), *range(len(timeline))]
    for k in order:
        want = fold(timeline.events[: timeline.frames[k].end], closing_from=timeline.closing_from)
        got = frames.at(k)
        assert got == want, k
        assert [log_text(ln).plain for ln in got.log_lines()] == [
            log_text(ln).plain for ln in want.log_lines()
        ]
    assert frames.at(3) is frames.at(3)  # cached


def test_step_back_state_holds_the_fd_table_read_after_that_step():
    recording = gallery.resolve("cpu-memfd-1mib")
    frames = FrameStates(Timeline(recording.events))
    for k, frame in enumerate(frames.frames[1:], start=1):
        state = frames.at(k)
        tail = recording.events[frames.frames[k - 1].end : frame.end]
        snaps = [e for e in tail if isinstance(e, FdSnapshot)]
        for snap in snaps:  # the last table of each role inside the frame is the one shown
            last = [s for s in snaps if s.role == snap.role][-1]
            assert state.panel(snap.role).fds == last


def test_fd_rows_of_the_fold_are_the_events_rows():
    row = FdRow(7, "socket:[1]", "listener", check="ok")
    state = fold([FdSnapshot("producer", 1, "S", [row])])
    assert state.panel("producer").fds.rows == [row]


def test_kcmp_is_of_the_present_until_a_table_an_exit_or_the_end_says_its_fds_closed():
    batches = session_batches(consumers=3)
    events = [e for b in batches for e in b]
    first_cleanup = next(i for i, e in enumerate(events) if getattr(e, "step", None) == "cleanup")
    state = fold(events[:first_cleanup])
    assert all(s.open for s in state.wire.kcmps.values()) and len(state.wire.kcmps) == 3
    assert state.status["kcmp"].open
    seen = state.wire.kcmps["consumer-1"]
    v = seen.verdict
    rows = state.panel("consumer-1").fds.rows
    # a table that could not be read says nothing of the pair
    unread = FdSnapshot("consumer-1", v.consumer_pid, "gone", [], error="EACCES")
    assert fold_one(state, unread).wire.kcmps["consumer-1"].open
    # the same number, now another file: the pair is gone
    other = [r if r.fd != v.consumer_fd else FdRow(r.fd, "pipe:[9]", FdClass.PIPE) for r in rows]
    gone = FdRow(v.consumer_fd, "/memfd:x", FdClass.CLOSED, check=FdCheck.REUSED)
    reused = FdSnapshot("consumer-1", v.consumer_pid, "ok", other, [gone])
    after = fold_one(state, reused)
    assert not after.wire.kcmps["consumer-1"].open
    assert after.wire.kcmps["consumer-2"].open and after.status["kcmp"].open  # consumer-3's
    assert after.wire.kcmps["consumer-1"].step == seen.step
    # another consumer's table, or another process's, does not touch it
    kept = FdSnapshot("consumer-2", v.consumer_pid + 1, "ok", [])
    assert fold_one(state, kept).wire.kcmps["consumer-1"].open
    # the producer's exit closes every pair
    exited = fold_one(state, WorkerExited("producer", v.producer_pid, None, "SIGKILL", False))
    assert not any(s.open for s in exited.wire.kcmps.values())
    assert not exited.status["kcmp"].open
    assert status_words(exited.status)["kcmp"].endswith("(kcmp; closed)")


def test_the_wire_is_folded_as_facts_and_worded_where_drawn():
    """The fold keeps what went over the wire (how, to whom, the fd numbers, each verdict); the
    words, and the masks of --stable, are the renderer's."""
    from vmmtui.view.model import Flight, How, Peer

    batches = session_batches()
    sent = fold(events_upto(batches, "producer", "send")).wire
    assert isinstance(sent.flight, Flight) and sent.flight.how is How.SENT
    assert say.wire_flight(sent.flight) == f"producer fd {sent.flight.fd} → SCM_RIGHTS → consumer …"
    assert isinstance(sent.peer, Peer) and sent.peer.name == "consumer"
    assert say.wire_peer(sent.peer).startswith(f"consumer pid {sent.peer.pid} (SO_PEERCRED uid")
    got = fold(events_upto(batches, "consumer", "receive")).wire
    assert got.flight is not None and got.flight.how is How.ARRIVED
    assert say.wire_flight(got.flight) == f"arrived as consumer fd {got.flight.fd}"
    whole = fold([e for b in batches for e in b]).wire
    [ack] = whole.acks.values()
    assert ack is not None and say.wire_ack(whole.acks) == f"verified ({ack.checked} integers)"
