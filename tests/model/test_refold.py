"""Re-folding a recording gives the findings it recorded: the same kinds, about the same
processes, in the same order (their words may be today's), and the one count at the end."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from vmmtui.model.findings import Weight
from vmmtui.model.policy import quiet_file, weigh
from vmmtui.model.probes import reclassified
from vmmtui.pipeline.session import refold
from vmmtui.record.recording import read
from vmmtui.stream.observed import LedgerFinding, TraceFinished

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted(
    [
        *(ROOT / "vmmtui/record/gallery").glob("*trace*.jsonl.gz"),
        *(ROOT / "tests/data/traces").glob("*.jsonl.gz"),
    ]
)


def _said(events):
    return [(f.kind, f.pid, f.peer) for f in events if isinstance(f, LedgerFinding)]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_a_recording_folds_again_to_the_findings_it_recorded(path: Path):
    recorded = list(reclassified(read(path).events))  # as a replay reads it
    again = refold(recorded)
    assert _said(again) == _said(recorded)
    end = next((e for e in reversed(again) if isinstance(e, TraceFinished)), None)
    if end is not None:
        found = [f for f in again if isinstance(f, LedgerFinding)]
        assert end.findings == len(found)
        weights = Counter(weigh(f) for f in found)
        assert (end.problems, end.quiet) == (weights[Weight.PROBLEM], weights[Weight.QUIET])
        assert end.quiet_by == dict(
            Counter(quiet_file(f) for f in found if weigh(f) is Weight.QUIET)
        )
