"""Which processes get a panel: the ones that share first, the rest folded and counted. Folded
from recordings of real programs (tests/data/traces): ``wrapped_share`` is a bash wrapper that
starts a tree of helpers and the scm_pair fixture (two processes share a memfd)."""

from __future__ import annotations

from pathlib import Path

from vmmtui.pipeline.replay import read
from vmmtui.view import ScreenState, fold
from vmmtui.view.lineup import Parties, Rank, lineup, rank
from vmmtui.view.programs import ProgramsView

TRACES = Path(__file__).parent.parent / "data" / "traces"


def view(name: str) -> ProgramsView:
    v = fold(read(TRACES / f"{name}.jsonl.gz").events, ScreenState.for_programs()).programs
    assert v is not None
    return v


def test_the_two_sharers_come_first_and_the_wrapper_and_helpers_are_folded():
    v = view("wrapped_share")
    [t] = v.transfer_list()
    sharers = {t.from_pid, t.to_pid}
    assert len(v.procs) > 40  # the helper tree is there, as traced
    for room in (1, 2, 3, 5):
        line = lineup(v, room)
        assert set(line.panels[:2]) <= sharers and len(line.panels) <= room
        assert set(line.panels) | set(line.folded) == set(v.procs)  # none dropped
        assert not set(line.panels) & set(line.folded)
    two = lineup(v, 2)
    assert set(two.panels) == sharers and two.folded_sharing == 0
    (root,) = v.targets
    assert root in two.folded and rank(v, v.procs[root], Parties.of(v)) == Rank.WRAPPER
    # room for more than what matters: the command's own process, never the helpers
    assert lineup(v, 10).panels[2:] == (root,)
    # one panel for two sharers: the other sharer is folded, and said to share
    one = lineup(v, 1)
    assert one.folded_sharing == 1 and (sharers - set(one.panels)) <= set(one.folded)


def test_a_refused_pidfd_getfd_puts_the_caller_and_its_target_first():
    v = view("pidfd_refused")
    [f] = [f for f in v.finding_list() if not f.good]
    assert f.peer and f.peer != f.pid
    assert set(lineup(v, 2).panels) == {f.pid, f.peer}  # not one of the 40 bash helpers
    assert rank(v, v.procs[f.peer], Parties.of(v)) == Rank.FINDING


def test_the_lineup_does_not_move_a_panel_as_calls_come():
    """Each rank in the order processes appeared: a later call of the same rank keeps the order."""
    events = read(TRACES / "wrapped_share.jsonl.gz").events
    state = ScreenState.for_programs()
    seen: list[tuple[int, ...]] = []
    for e in events:
        state = fold([e], state)
        assert state.programs is not None
        seen.append(lineup(state.programs, 3).panels)
    sharers_order = [p for p in seen[-1] if p in Parties.of(state.programs).moved]
    for panels in seen:
        both = [p for p in panels if p in sharers_order]
        assert both == sharers_order[: len(both)] or len(both) < 2
