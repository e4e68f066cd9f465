"""A trace's memory is bounded whatever its length: ``vmmtui trace --json`` follows a memfd shared
2,000 times a second (scripts/trace-memory.py, trace-bench.py's load) and its resident set size,
read from /proc every few seconds, stays flat once it has started; then SIGINT (or q, the
inspector's) ends it promptly, its probes going with it; the same for the inspector in a
pseudo-terminal. 40 s in the slow tier; in the soak tier three minutes, whose slope after the
first minute bounds what ten minutes would add (a leak is a slope, and a slope shows in minutes:
before, ten minutes of wall time each, one after the other, were most of CI's time). Needs root,
BTF and libbpf: skipped, saying why, elsewhere.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def measure():
    spec = importlib.util.spec_from_file_location("trace_memory", ROOT / "scripts/trace-memory.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.measure


#: the most RSS a trace may reach at this load, whatever its length (MB)
BOUND_MB = {"json": 200, "inspector": 500}


def flat(mode: str, seconds: float, every: float, settled: float, horizon: float = 0) -> dict:
    """RSS under the mode's bound throughout, and flat after ``settled`` s: its trend (``trend``,
    MB a second) grows it under 20 % from the settled sample to the last (a short run), or, with a
    ``horizon`` (s), would grow it under 10 % over that long (the soak: three minutes' slope held
    to what ten minutes may add). RSS is a high-water mark: a backlog while the machine was busy
    raises it once, for good, which the median of the slopes does not count; growth with the
    trace's length is a slope every pair of samples shows."""
    result = measure()(mode, 2000, seconds, every, ROOT, sys.executable)
    if out := os.environ.get("VMMTUI_MEMORY_OUT"):  # the samples, for bench/results
        with open(out, "a") as f:
            f.write(json.dumps(result) + "\n")
    samples = result["samples"]
    span = [(t, mb) for t, mb in samples if t >= settled]
    assert len(span) >= 3, result
    assert result["peak_mb"] < BOUND_MB[mode], f"RSS reached {result['peak_mb']} MB: {samples}"
    # before: +2.5 MB a second (--json), +23 MB a second (the inspector) at this rate
    over = horizon or span[-1][0] - span[0][0]
    growth = trend(span) * over / span[0][1]
    limit = 0.10 if horizon else 0.20
    assert growth < limit, (
        f"RSS would grow {growth:.0%} in {over:.0f} s after {settled} s: {samples}"
    )
    assert result["bpf_links"] > 0, result  # it traced with eBPF (the probes were attached)
    assert result["ended_s"] < 3, result  # ended promptly; its probes went with its process
    return result


def trend(samples: list[tuple[float, float]]) -> float:
    """MB a second that RSS grows with the trace's length: the median of the slopes between every
    two samples (Theil-Sen). A leak is a slope that every pair shows; a backlog while the machine
    was busy is one step up (RSS is a high-water mark), which only the pairs across it show."""
    slopes = [
        (mb2 - mb1) / (t2 - t1) for (t1, mb1), (t2, mb2) in itertools.combinations(samples, 2)
    ]
    return statistics.median(slopes)


def test_the_trend_sees_a_leak_and_not_one_step():
    """The estimator itself: a steady +1 MB a sample is growth, one step of +50 MB is not."""
    leak = [(t * 10.0, 300.0 + t) for t in range(30)]
    step = [(t * 10.0, 300.0 + (50 if t > 20 else 0)) for t in range(30)]
    assert trend(leak) == pytest.approx(0.1) and trend(step) == 0


@pytest.mark.slow
@pytest.mark.serial  # RSS trends, and an end within 3 s
def test_trace_json_memory_is_flat_for_40_s_of_2000_shares_a_second(ebpf):
    flat("json", 40, 5, 10)


@pytest.mark.slow
@pytest.mark.serial  # RSS trends, and an end within 3 s
def test_trace_inspector_memory_is_flat_for_40_s_of_2000_shares_a_second(ebpf):
    """The inspector in a pseudo-terminal at 160x48 (it forgets frames past 100,000 events,
    about 20 s of this load); q ends it."""
    flat("inspector", 40, 5, 25)


#: the soak: three minutes sampled every 5 s, the slope from the first minute on held to what
#: ten minutes may add
SOAK_S, SOAK_EVERY, SOAK_SETTLED, SOAK_HORIZON = 180, 5, 60, 600
#: the inspector's bounds fill one after another (frames, the log, the world's kept findings):
#: its RSS settles over two minutes, not one. Six minutes measured on the 2-core machine
#: (bench/results/trace-memory-inspector-6min-2core-vm-2026-12-02.json): 326.7 MB at 60 s,
#: 349.5 at 120 s, 354.4 at 230 s, 355.2 at 360 s -- a curve that flattens, where a leak keeps
#: its slope: five minutes, the slope from the third minute on (that run's: 0.3 % in ten minutes;
#: from the first: 29 %, from the second to the third: 9.7 %)
INSPECTOR_S, INSPECTOR_SETTLED = 300, 180


@pytest.mark.soak
@pytest.mark.serial  # RSS trends, and an end within 3 s
def test_trace_json_memory_would_stay_flat_for_10_minutes_of_2000_shares_a_second(ebpf):
    flat("json", SOAK_S, SOAK_EVERY, SOAK_SETTLED, SOAK_HORIZON)


@pytest.mark.soak
@pytest.mark.serial  # RSS trends, and an end within 3 s
def test_trace_inspector_memory_would_stay_flat_for_10_minutes_of_2000_shares_a_second(ebpf):
    """The inspector in a pseudo-terminal at 160x48; q ends it."""
    flat("inspector", INSPECTOR_S, SOAK_EVERY, INSPECTOR_SETTLED, SOAK_HORIZON)
