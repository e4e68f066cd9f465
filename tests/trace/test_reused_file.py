"""Identity that cannot leak, on real processes traced with eBPF (tests/fixtures/reused_file.py):
a memfd freed and its ``struct file`` address reused at once by a pipe (one CPU: the kernel's
slab hands the freed file to the next made there) is a new object, a pipe, of no memory; the
child that keeps the pipe's ends to its exit has no memory finding. Skipped where eBPF is
missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.model.findings import carries_memory
from vmmtui.stream.events import Event
from vmmtui.stream.observed import FdsSent, LedgerFinding, MemfdCreated

pytestmark = pytest.mark.usefixtures("ebpf")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_pipe_on_a_freed_memfds_address_is_a_pipe_of_no_memory():
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--no-cuda", "--",
         sys.executable, str(FIXTURES / "reused_file.py"), "20"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    events = [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()]
    memfds = {e.file for e in events if isinstance(e, MemfdCreated)}
    pipes = {
        f for e in events if isinstance(e, FdsSent)
        for f, kind in zip(e.files, e.kinds, strict=False) if kind == "pipe"
    }  # fmt: skip
    reused = memfds & pipes
    if not reused:  # the kernel gave every pipe a fresh struct file: nothing to prove here
        pytest.skip("no struct file address was reused in 20 rounds")
    said = [e for e in events if isinstance(e, LedgerFinding) and e.file in reused]
    kept = [f for f in said if f.kind != "shared" and f.via == "SCM_RIGHTS" and f.name]
    assert kept, said  # each pipe end the child kept to its exit is said, as what it is
    assert {f.kind for f in kept} == {"fd-closed-by-exit"}, [(f.kind, f.name) for f in kept]
    assert all(f.name == "pipe" and not carries_memory(f.name) for f in kept)
    assert not [f for f in said if f.kind in ("growth", "held-at-exit", "fd-never-closed")]
