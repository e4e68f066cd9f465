"""Calls that fail by design to probe a capability are probes, not refusals: one pure function
decides (``vmmtui.model.probes.classify``), the ledger emits a ``CapabilityProbe``, nothing counts it
as a problem, and recordings made before say it the same way."""

from __future__ import annotations

import pytest

from vmmtui.model.ledger import Ledger
from vmmtui.model.probes import Capability, Context, Found, Probe, classify
from vmmtui.pipeline.replay import trace_timeline
from vmmtui.record.gallery import find
from vmmtui.record.recording import read
from vmmtui.stream.observed import CapabilityProbe, CudaCall, LedgerFinding, TraceFinished
from vmmtui.view.frames import FrameStates
from vmmtui.view.model import ScreenState
from vmmtui.words.log import log_text
from vmmtui.words.status import status_words
from vmmtui.words.trace import lines

FABRIC, POSIX = 8, 1


@pytest.mark.parametrize(
    ("func", "types", "result", "context", "probe"),
    [
        ("cuMemCreate", FABRIC, 800, Context(), Probe(Capability.FABRIC_HANDLES, Found.NO_IMEX_CHANNEL)),
        ("cuMemCreate", FABRIC | POSIX, 800, Context(imex_channel=False), Probe(Capability.FABRIC_HANDLES, Found.NO_IMEX_CHANNEL)),
        ("cuMemCreate", FABRIC, 800, Context(imex_channel=True), Probe(Capability.FABRIC_HANDLES, Found.IMEX_REFUSED)),
        ("cuMemCreate", FABRIC, 801, Context(), Probe(Capability.FABRIC_HANDLES, Found.NOT_SUPPORTED)),
        ("cuMemCreate", FABRIC, 2, Context(), None),  # out of memory: a failure
        ("cuMemCreate", POSIX, 800, Context(), None),  # no fabric asked: a failure
        ("cuMemCreate", FABRIC, 800, Context(fabric_worked=True), None),  # it worked before
        ("cuMemExportToShareableHandle", FABRIC, 801, Context(), None),
        ("cuMemCreate", FABRIC, 0, Context(), None),
    ],
)  # fmt: skip
def test_classify(func, types, result, context, probe):
    assert classify(func, types, result, context) == probe


def _call(types: int, result: int, pid: int = 7, t: int = 10) -> CudaCall:
    return CudaCall(pid, pid, t, "cuMemCreate", result, 2 << 20, 0, types, 0 if result else 0xA)


def test_the_ledger_says_a_probe_and_no_refusal_and_a_real_failure_stays_one():
    ledger = Ledger()
    [probe] = ledger.apply(_call(FABRIC, 800))
    assert isinstance(probe, CapabilityProbe) and probe.found == "no-imex-channel"
    assert ledger.findings == [] and ledger.probes == [probe]
    assert ledger.apply(_call(POSIX, 0, t=11)) == []
    [oom] = ledger.apply(_call(POSIX, 2, t=12))
    assert isinstance(oom, LedgerFinding) and oom.kind == "refused"
    text = lines(probe)[0]
    assert "fabric handles unavailable here: no IMEX channel" in text.plain
    assert text.style == "dim" and "✗" not in text.plain and "refused" not in text.plain
    call_line = lines(_call(FABRIC, 800), t0=1)[0]
    assert call_line.style != "red"


def test_the_gallery_torch_trace_has_probes_and_nothing_to_look_at():
    from vmmtui.model.probes import reclassified
    from vmmtui.pipeline.replay import replayed

    rec = read(find("h100-trace-torch-expandable"))
    rec.events = list(reclassified(rec.events))  # an older recording's refusals read as probes
    probes = [e for e in rec.events if isinstance(e, CapabilityProbe)]
    assert len(probes) == 3 and {p.found for p in probes} == {"no-imex-channel"}
    refused = [e for e in rec.events if isinstance(e, LedgerFinding) and e.kind == "refused"]
    assert not refused, refused
    [end] = [e for e in rec.events if isinstance(e, TraceFinished)]
    assert end.findings == 0  # recorded as 3: the probes counted as findings
    states = FrameStates(trace_timeline(rec.events), ScreenState.for_programs())
    last = states.at(states.last)
    assert last.programs is not None and last.programs.bad_findings == 0
    assert "0 to look at" in status_words(last.status).get("findings", "0 to look at"), last.status
    again = replayed(read(find("h100-trace-torch-expandable"))).events  # findings found again
    assert [e for e in again if isinstance(e, CapabilityProbe)] == probes
    [end] = [e for e in again if isinstance(e, TraceFinished)]
    assert end.problems == 0 and end.findings == sum(isinstance(e, LedgerFinding) for e in again)
    log = "\n".join(log_text(x).plain for x in last.log_lines())
    assert "fabric handles unavailable here: no IMEX channel" in log
