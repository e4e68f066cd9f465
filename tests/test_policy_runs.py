"""The policy (``vmmtui/model/policy.py``) on real processes traced with eBPF
(tests/fixtures/policy_cases.py, memfds over SCM_RIGHTS): a browser's start-up and a receiver
that keeps the latest bucket are no problem; a hold after its exporter ended is a quiet fact
inside the teardown window and orphaned past it, said while it lasts; ``trace --max-pinned``
fails a run that pins more."""

from __future__ import annotations

from pathlib import Path

from tracing import FIXTURES, said, trace_program

from vmmtui.model.findings import Weight
from vmmtui.model.policy import TEARDOWN_WINDOW_NS, Fact, Problem, judge, relation_of
from vmmtui.stream.observed import LedgerFinding, ProcessExit

CASES = FIXTURES / "policy_cases.py"


def run(tmp_path: Path, *args: str, extra: tuple[str, ...] = (), ok: bool = True):
    res, told, events = trace_program(tmp_path, CASES, *args, extra=extra, ok=ok)
    (pids,) = told
    found = [e for e in events if isinstance(e, LedgerFinding)]
    return res, pids, events, found


def problems(found: list[LedgerFinding]) -> set:
    return {r for f in found if (r := relation_of(f)) is not None}


def test_a_browsers_start_up_kept_for_the_renderers_life_is_facts_not_problems(ebpf, tmp_path):
    """Three bursts of shared regions (2, 30, 1) kept until the renderer's normal exit, its
    browser alive: every region is a fact the exit released, none orphaned, nothing broken."""
    res, pids, _, found = run(tmp_path, "browser")
    kept = [f for f in found if f.kind in ("fd-never-closed", "held-at-exit")]
    assert len(kept) == 33 and all(judge(f).fact == Fact.HELD_UNTIL_EXIT for f in kept)
    assert {f.pid for f in kept} == {pids["child"]}
    assert not {r for r in problems(found) if r.problem != Problem.GROWTH}, said(res)
    assert "held until exit, released by it" in res.stdout


def test_a_browsers_start_up_is_not_growth(ebpf, tmp_path):
    res, _, _, found = run(tmp_path, "browser")
    assert not problems(found), said(res)
    assert "verdict: nothing to look at" in res.stdout


def test_a_receiver_that_keeps_only_the_latest_bucket_is_no_problem(ebpf, tmp_path):
    res, pids, _, found = run(tmp_path, "latest")
    assert not problems(found), said(res)
    assert [f.kind for f in found if f.kind == "fd-never-closed"] == ["fd-never-closed"]
    assert "verdict: nothing to look at" in res.stdout, said(res)


def test_a_hold_that_ends_inside_the_teardown_window_is_a_quiet_fact(ebpf, tmp_path):
    """The child lets go 5 ms after its exporter ended (a shutdown's own order): no
    held-after-exporter-died, only its end, counted as let go within the window."""
    res, pids, _, found = run(tmp_path, "orphan", "0.005")
    assert not problems(found), said(res)
    assert "held-after-exporter-died" not in [f.kind for f in found]
    [over] = [f for f in found if f.kind == "released-after-exporter-died"]
    assert (over.pid, over.peer) == (pids["child"], pids["parent"])
    assert judge(over).weight is Weight.QUIET and judge(over).fact == Fact.WITHIN_WINDOW
    assert "let go within the 2 s teardown window" in res.stdout


def test_a_hold_past_the_teardown_window_is_orphaned_and_said_while_it_lasts(ebpf, tmp_path):
    # held 5 s: said live once past the 2 s window, with room for a loaded machine's ticks
    res, pids, events, found = run(tmp_path, "orphan", "5")
    [held] = [f for f in found if f.kind == "held-after-exporter-died"]
    assert (held.pid, held.peer) == (pids["child"], pids["parent"])
    assert judge(held).problem is Problem.ORPHANED
    assert held.ktime - held.since >= TEARDOWN_WINDOW_NS
    # live: said before the holder let go (its exit), and its end said after, in the past
    exit_at = next(
        i for i, e in enumerate(events) if isinstance(e, ProcessExit) and e.pid == pids["child"]
    )
    assert events.index(held) < exit_at
    [over] = [f for f in found if f.kind == "released-after-exporter-died"]
    assert judge(over).fact == Fact.RELEASED_LATE and over.ktime - over.since >= 5e9 * 0.9
    assert {r[:3] for r in problems(found)} == {(Problem.ORPHANED, pids["child"], pids["parent"])}
    assert "verdict: 1 to look at (1 held-after-exporter-died)" in res.stdout


def test_twenty_pieces_of_one_orphaned_pool_are_one_problem_said_once(ebpf, tmp_path):
    """The LMCache#4014 pattern on memfds: a pool of 20 pieces held 3 s after its exporter
    ended is one orphaned problem: one line while it lasts, one line of its end, the end line's
    one to look at and the problem whole; every pin in the recording (--json)."""
    res, pids, _, found = run(tmp_path, "orphan", "3", "20")
    held = [f for f in found if f.kind == "held-after-exporter-died"]
    assert len(held) == 20 and len({f.file for f in held}) == 20
    assert {r[:3] for r in problems(found)} == {(Problem.ORPHANED, pids["child"], pids["parent"])}
    lines = res.stdout.splitlines()
    assert sum("held-after-exporter-died" in x and "still holds" in x for x in lines) == 1
    assert sum("released-after-exporter-died" in x for x in lines) == 1
    assert "verdict: 1 to look at (1 held-after-exporter-died)" in res.stdout
    whole = f"held-after-exporter-died · pid {pids['child']}: held 20 pins of pid {pids['parent']}"
    assert whole in res.stdout, said(res)


def test_trace_max_pinned_fails_a_run_over_it_in_one_line(ebpf, tmp_path):
    """1 MiB held by the child for a second: over a budget of 64 KiB (exit 1, one line naming
    the peak and what pinned it), within one of 4 MiB (the command's exit, 0)."""
    res, pids, _, _ = run(tmp_path, "hold", "1", extra=("--max-pinned", "64KiB"), ok=False)
    assert res.returncode == 1, said(res)
    [line] = [x for x in res.stderr.splitlines() if "over budget" in x]
    assert "1 MiB pinned across live processes" in line and "--max-pinned 64 KiB" in line
    assert f"pid {pids['child']}'s fd" in line and "(exit 1)" in line
    res, _, _, _ = run(tmp_path, "hold", "1", extra=("--max-pinned", "4MiB"))
    assert res.returncode == 0 and "over budget" not in res.stderr, said(res)
