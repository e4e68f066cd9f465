"""A program that outruns the inspector: 50,000 memfds shared a second for 30 s, traced with the
inspector open in a pseudo-terminal. The inspector's memory stays under ``BOUND_MB`` (its backlog
is bounded: past it the screen counts the calls it does not draw and says so), q ends it within
about a second, and nothing is left (the traced processes, the probes' links). Before, its memory
grew about 50 MB a second and q waited 10 s to minutes behind a queue of batches. Soak tier
(about a minute; root, BTF and libbpf)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "tui"))
from terminal import Terminal, alive  # noqa: E402

pytestmark = pytest.mark.soak

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "memfd_flood.py"
RATE = 50_000
RUN_S = 30
#: the inspector's resident set, whatever the rate: 100,000 events of frames kept (the forget
#: bound), 20,000 waiting (the backlog bound), the ledger's bounded books, Textual
BOUND_MB = 800
#: 1 s promised; the margin is for a loaded 2-core machine
WITHIN_S = 2.0


@pytest.fixture(autouse=True)
def _ebpf():
    from vmmtui.trace.loader import why_not

    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")


def test_a_flood_keeps_the_inspector_bounded_and_q_ends_it_at_once(tmp_path):
    load = [sys.executable, str(FIXTURE), str(RATE * RUN_S * 4), str(RATE)]
    term = Terminal(tmp_path, "trace", "--no-cuda", "--", *load, width=120, height=40)
    try:
        term.wait_for("LIVE", 60)
        me = psutil.Process(term.proc.pid)
        peak, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < RUN_S:
            time.sleep(1)
            peak = max(peak, me.memory_info().rss >> 20)
            term.workers()  # the traced processes, remembered for the end
        assert peak < BOUND_MB, f"the inspector reached {peak} MB"
        assert term.proc.poll() is None, "the trace ended before q"
        term.press("q")
        took = term.ended_within(30)
        assert took is not None and took < WITHIN_S, f"q: ended after {took} s"
        time.sleep(0.2)
        assert alive(sorted(term._seen)) == [], "traced processes left running"
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("vmmtui-")] == []
    finally:
        term.close()
