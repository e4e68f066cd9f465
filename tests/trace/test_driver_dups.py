"""Fds the driver dups inside its own calls are the driver's, on real processes traced with eBPF
and the stand-in libcuda (tests/fixtures/fake_libcuda.c with ``VMMTUI_FAKE_CUDA_DUP``: its
``cuMemPoolImportFromShareableHandle`` dups the fd it is handed and keeps the dup, as libcuda
does). The importer of tests/fixtures/fake_pool_calls.py closes the fd it received and exits
holding its imported pool: the driver's dup folds into the pool's finding, and nothing tells the
program to close a dup it never made."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.tracing import fake_libcuda, said, vmmtui_trace
from vmmtui.stream.events import Event
from vmmtui.stream.observed import CudaCall, FdDuplicated, LedgerFinding
from vmmtui.words.findings import finding_words

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.usefixtures("ebpf")
def test_a_dup_the_driver_made_inside_its_import_is_the_pools_not_the_programs(tmp_path):
    lib = fake_libcuda(tmp_path)
    res = vmmtui_trace(
        "--json", "--libcuda", str(lib), "--",
        sys.executable, str(FIXTURES / "fake_pool_calls.py"), str(lib),
        env={"VMMTUI_FAKE_CUDA_DUP": "1", "NO_COLOR": "1"}, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, said(res)
    events = [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()]
    [imp] = [e for e in events if isinstance(e, CudaCall) and "PoolImportFrom" in e.func]
    [dup] = [e for e in events if isinstance(e, FdDuplicated) and e.pid == imp.pid]
    assert dup.old == imp.fd and imp.ktime <= dup.ktime <= imp.ktime + imp.duration_ns
    found = [e for e in events if isinstance(e, LedgerFinding) and e.pid == imp.pid]
    assert not [f for f in found if f.kind == "held-at-exit"], [finding_words(f) for f in found]
    [pool] = [f for f in found if f.kind == "pool-never-destroyed"]
    assert pool.fds == [dup.fd] and pool.how == "imported"  # the driver's dup, folded in
    words = [finding_words(f) for f in found]
    assert not [w for w in words if "dup" in w.fix], words
