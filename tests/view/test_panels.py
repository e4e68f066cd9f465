"""Each panel's one view type, made from either source's state: the demo's session (workers under
a plan) and a trace (programs vmmtui did not start). No app here."""

from __future__ import annotations

from pathlib import Path

from events_fixture import session_events

from vmmtui.pipeline.replay import read
from vmmtui.view import ScreenState, fold
from vmmtui.view.panels import process_view, verdicts_view, wire_view

TRACES = Path(__file__).parent.parent / "data" / "traces"


def test_a_worker_is_a_process_with_the_plan_over_it():
    events = session_events(consumers=2)
    start = fold(events[:1], ScreenState.blank(2))
    done = fold(events, ScreenState.blank(2))
    role, step = start.next_step or ("", "")
    view = process_view(start, role)
    assert view.worker is not None and view.program is None
    assert view.plan is not None and view.plan.next_step == step  # its turn: the step is its
    other = next(r for r in start.roles if r != role)
    assert process_view(start, other).plan.next_step is None  # type: ignore[union-attr]
    producer = process_view(done, "producer")
    assert producer.pid == done.panel("producer").pid and producer.pid is not None
    assert producer.front == (done.front or "consumer-1")
    assert producer.worker == done.panel("producer")
    assert process_view(start, "producer").front == "consumer-1"  # before any: the first
    assert wire_view(done).session is done.wire and wire_view(done).programs is None
    assert verdicts_view(done).verification is done.verification is not None


def test_a_traced_program_is_a_process_with_its_fds_memory_and_calls():
    state = fold(read(TRACES / "scm_pair.jsonl.gz").events, ScreenState.for_programs())
    v = state.programs
    assert v is not None and v.procs
    for pid, p in v.procs.items():
        view = process_view(state, pid)
        assert (view.name, view.pid, view.program, view.programs) == (p.name, pid, p, v)
        assert view.worker is None and view.plan is None
    wire = wire_view(state)
    assert wire.session is None and wire.programs is v and v.transfers_len
    assert wire.key != wire_view(ScreenState.for_programs()).key  # a transfer repaints it
    verdicts = verdicts_view(state)
    assert verdicts.programs is v and verdicts.verification is None
