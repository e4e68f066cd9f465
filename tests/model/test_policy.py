"""The one policy (``vmmtui/model/policy.py``): every kind of finding has one rule, the page's
table of kinds is made from that list, a hold after its exporter ended is a fact inside one
teardown window and orphaned past it, kept-until-exit is a fact, and problems are counted by
relation, not by pin."""

from __future__ import annotations

from pathlib import Path

from vmmtui.model.findings import FindingKind, Weight
from vmmtui.model.policy import (
    BY_KIND,
    FAILING,
    LET_GO,
    TEARDOWN_WINDOW_NS,
    Fact,
    Problem,
    Problems,
    counted_as,
    judge,
    tally,
    weigh,
)
from vmmtui.stream.events import LeakKind
from vmmtui.stream.observed import LedgerFinding
from vmmtui.words.policy import BEGIN, END, MEANS, kinds_table

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
S = 1_000_000_000


def test_every_kind_the_world_says_has_one_rule_and_one_meaning():
    kinds = {str(k) for k in FindingKind} | {str(k) for k in LeakKind}
    assert kinds <= set(BY_KIND), kinds - set(BY_KIND)
    assert set(MEANS) == set(BY_KIND)


def test_the_pages_table_of_kinds_is_the_policys_list():
    page = (ROOT / "docs" / "testing.md").read_text()
    shown = BEGIN + page.split(BEGIN, 1)[1].split(END, 1)[0] + END
    assert shown == kinds_table(), "run: python scripts/kinds-table.py"
    for kind in FAILING:  # the page says which kinds fail a test
        assert f"| `{kind}` |" in shown and f"| `{kind}` | " in shown


def test_only_growth_orphans_budgets_and_broken_rules_fail_a_test():
    assert {BY_KIND[k].problem for k in FAILING} == set(Problem)
    for kind in ("fd-never-closed", "held-at-exit", "held-until-exit", "import-never-released",
                 "ipc-never-closed", "pool-never-destroyed", "pool-pointer-never-freed",
                 "exported-never-imported", "exporter-died", "freed-at-teardown"):  # fmt: skip
        assert kind not in FAILING, kind


def held(pid: int, peer: int, lasted_ns: int, **facts) -> LedgerFinding:
    return LedgerFinding.of(
        "held-after-exporter-died", pid, 10 * S + lasted_ns, peer=peer, since=10 * S, **facts
    )


def test_a_hold_after_its_exporter_ended_weighs_by_how_long_it_lasted():
    short = held(7, 6, 5_000_000)  # the trace ended 5 ms after the exporter: inside the window
    assert weigh(short) is Weight.QUIET and judge(short).fact == Fact.WINDOW_OPEN
    let_go = held(7, 6, 0, how=LET_GO)  # let go inside it (a share seen before the trace)
    assert weigh(let_go) is Weight.QUIET and judge(let_go).fact == Fact.WITHIN_WINDOW
    long = held(7, 6, TEARDOWN_WINDOW_NS)
    assert weigh(long) is Weight.PROBLEM and judge(long).problem is Problem.ORPHANED
    # its end in the past: a fact either way, counted apart from the holds let go in time
    ended = LedgerFinding.of(
        "released-after-exporter-died", 7, 13 * S, peer=6, since=10 * S, via="close"
    )
    assert judge(ended).fact == Fact.RELEASED_LATE
    quick = LedgerFinding.of(
        "released-after-exporter-died", 7, 10 * S + 5_000_000, peer=6, since=10 * S
    )
    assert judge(quick).fact == Fact.WITHIN_WINDOW


def test_an_unknown_weighs_as_what_it_would_be_and_is_never_good_news():
    lost = {"lost": 3, "lost_first_ns": 1, "lost_last_ns": 2}
    kept = LedgerFinding.of("unknown", 7, S, was="fd-never-closed", **lost)
    assert weigh(kept) is Weight.QUIET and judge(kept).fact == Fact.UNDECIDED
    twice = LedgerFinding.of("unknown", 7, S, was="released-twice", **lost)
    assert weigh(twice) is Weight.PROBLEM
    share = LedgerFinding.of("unknown", 7, S, was="shared", **lost)
    assert weigh(share) is Weight.QUIET


def test_205_segments_held_after_their_exporter_was_killed_are_one_problem_of_4_gib():
    """The LMCache#4014 pattern: a killed client's pool in 205 expandable 20 MiB segments, each
    held by the server (an import and a mapping: two findings a segment, and its fd): one
    problem, its bytes summed once per segment, its pins listed."""
    found = []
    for seg in range(205):
        for pin in ("import", "mapping", "fd"):
            found.append(held(806, 805, int(5.6 * S), handle=0x100 + seg, size=20 * MIB,
                              memory="allocation", how=pin))  # fmt: skip
    t = tally(counted_as(f) for f in found)
    assert (t.bad, t.good, t.quiet) == (1, 0, 0)
    (p,) = Problems().extend(found)
    assert p.relation[:3] == (Problem.ORPHANED, 806, 805)
    assert len(p.pins) == 205 and p.bytes == 205 * 20 * MIB and p.peak_bytes == p.bytes
    assert p.findings == 615 and p.held_ns == int(5.6 * S)
    # another holder of the same exporter is another problem
    found.append(held(807, 805, 3 * S, handle=1, size=MIB, memory="allocation"))
    assert tally(counted_as(f) for f in found).bad == 2


def test_an_fd_queued_at_its_receivers_exit_is_a_fact_and_at_a_close_a_problem():
    """unix(7): fds in flight are closed when their socket goes. The receiver's exit released
    it (Chromium's utility processes at shutdown): nothing held, a fact. A live process that
    closes its end with the fd queued lost the share: a broken rule."""
    at_exit = LedgerFinding.of("in-flight", 7, 10 * S, peer=8, fd=5, how="exit")
    assert weigh(at_exit) is Weight.QUIET and judge(at_exit).fact == Fact.QUEUED_AT_EXIT
    closed = LedgerFinding.of("in-flight", 7, 10 * S, peer=8, fd=5, how="close")
    assert weigh(closed) is Weight.PROBLEM and judge(closed).problem is Problem.BROKEN_RULE
    unseen = LedgerFinding.of("in-flight", 7, 10 * S, fd=-1)  # its send not seen: no how
    assert weigh(unseen) is Weight.PROBLEM
