"""Recordings that keep every event: written to disk as the events come, however many (the
recorder once stopped at 4 MiB, silently: a 30,000-share trace kept 2,457 sends and exited 0),
and read back a line at a time. A recording made by ``tracing()`` or the pytest plugin has no
name until it is whole: a kill -9 of its process leaves nothing in TMPDIR, neither a ``.part``
nor an empty file named like it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.commands import ROOT, vmmtui
from vmmtui.pipeline.replay import read as replayed
from vmmtui.record.recording import read
from vmmtui.stream.observed import FdsSent, TraceLost

FLOOD = Path(__file__).resolve().parents[1] / "fixtures" / "memfd_flood.py"
#: sends; at about 1.5 KiB of recording a send (its call, its receive, its close), about 9 MiB
#: once decompressed: more than twice the old 4 MiB cap
SENDS = 6000
OLD_CAP = 4 << 20


def _ebpf() -> None:
    from vmmtui.trace.loader import why_not

    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trace.jsonl", "trace.jsonl.gz"])
def test_a_trace_recording_past_any_cap_holds_every_send_and_replays_them_all(tmp_path, name):
    _ebpf()
    rec = tmp_path / name
    load = [sys.executable, str(FLOOD), str(SENDS), "3000"]
    res = vmmtui("trace", "--no-cuda", "--record", str(rec), "--", *load, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    stored = read(rec)
    assert stored.cut == "", stored.cut
    lost = sum(e.count for e in stored.events if isinstance(e, TraceLost))
    sent = sum(len(e.fds) for e in stored.events if isinstance(e, FdsSent))
    assert lost == 0, f"the ring lost {lost} records: the machine is too busy for this count"
    assert sent == SENDS, f"the recording holds {sent} of {SENDS} sends"
    if name.endswith(".jsonl"):
        assert rec.stat().st_size > OLD_CAP  # more than the old cap let a recording hold
    else:
        assert rec.stat().st_size < OLD_CAP  # compressed as it was written
    again = replayed(rec)
    assert sum(len(e.fds) for e in again.events if isinstance(e, FdsSent)) == SENDS


def _ours(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if "vmmtui" in p.name or p.suffix == ".part")


def _killed_when_ready(cmd: list[str], tmp: Path, cwd: Path) -> None:
    """``cmd`` run with TMPDIR=tmp, SIGKILLed (its process group) once it prints READY."""
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        assert proc.stdout is not None
        for line in proc.stdout:
            if "READY" in line or time.monotonic() > deadline:
                break
        time.sleep(0.5)  # a few events on their way to the recording
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)


SCRIPT = """
import os, sys, time
import vmmtui
with vmmtui.tracing(poll=True) as t:
    a = os.memfd_create("held")
    print("READY", flush=True)
    time.sleep(60)
"""


def test_a_tracing_script_killed_leaves_no_part_and_no_empty_recording(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = tmp_path / "traced.py"
    script.write_text(textwrap.dedent(SCRIPT))
    _killed_when_ready([sys.executable, str(script)], tmp, tmp_path)
    assert _ours(tmp) == []


def test_a_tracing_script_that_ends_leaves_its_recording_whole(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = tmp_path / "traced.py"
    script.write_text(SCRIPT.replace("time.sleep(60)", "pass") + "print(t.recording)\n")
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    path = Path(out.stdout.split()[-1])
    assert path.parent == tmp and path.name.endswith(".jsonl.gz")
    assert _ours(tmp) == [path.name] and read(path).cut == ""


TEST = """
import time

def test_sleeps():
    print("READY", flush=True)
    time.sleep(60)
"""


def test_pytest_vmmtui_killed_leaves_no_part_and_no_empty_recording(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "test_slow_one.py").write_text(TEST)
    cmd = [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", "-n", "0"]
    cmd += ["--vmmtui", "--vmmtui-poll", "test_slow_one.py"]
    _killed_when_ready(cmd, tmp, tmp_path)
    assert _ours(tmp) == []
