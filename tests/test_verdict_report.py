"""A failing test's section stays short (issue 51: one section ran to 6,012 lines for 2,000
findings): the findings of one relation are one problem, and at most ``PER_KIND`` problems of a
kind are printed, then how many more, where the recording has them."""

from __future__ import annotations

from pathlib import Path

from vmmtui.model.findings import Weight
from vmmtui.model.policy import Problems
from vmmtui.stream.observed import LedgerFinding
from vmmtui.verdict.api import Mode, Verdict, _problem
from vmmtui.verdict.plugin import PER_KIND

S = 1_000_000_000


def held(holder: int, exporter: int, piece: int) -> LedgerFinding:
    return LedgerFinding.of(
        "held-after-exporter-died", holder, 13 * S, peer=exporter, since=10 * S,
        handle=0x100 + piece, size=20 << 20, memory="allocation",
    )  # fmt: skip


def verdict(found: list[LedgerFinding]) -> Verdict:
    each = tuple(_problem(p) for p in Problems().extend(found))
    return Verdict(Mode.EBPF, "", each, each, (), 0, None, recording=Path("/tmp/x.jsonl"))


def test_two_thousand_pins_of_one_relation_are_one_problem_in_a_few_lines():
    v = verdict([held(806, 805, i) for i in range(2000)])
    (p,) = v.problems
    assert (p.weight, p.findings, p.pins, p.bytes) == (
        Weight.PROBLEM,
        2000,
        2000,
        2000 * (20 << 20),
    )
    report = v.report(PER_KIND)
    assert len(report.splitlines()) <= 6, report
    assert "holds 39.1 GiB in 2000 pins of pid 805's memory, 3.0 s after pid 805 ended" in report


def test_at_most_per_kind_problems_of_a_kind_are_printed_then_how_many_more():
    v = verdict([held(900 + i, 805, 0) for i in range(12)])  # twelve holders: twelve problems
    assert len(v.problems) == 12
    report = v.report(PER_KIND)
    assert report.count("held-after-exporter-died · pid") == PER_KIND
    assert f"+{12 - PER_KIND} more held-after-exporter-died (the recording has them: " in report
    assert "vmmtui replay /tmp/x.jsonl" in report
    assert v.report().count("held-after-exporter-died · pid") == 12  # the API's own: every one
