"""``attach --once`` and ``--json`` with the stand-in NVML (fixtures/fake_nvml.c, loaded where
``VMMTUI_NVML`` names it): the GPU table names every process NVML charges, the one attached to
with what the trace saw of it (found held: polling sees no CUDA call), the others as not traced;
``--json`` has the same table as a ``GpuTable`` event after the ``NvmlSample`` it joins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.tracing import fake_nvml

MIB = 1 << 20


@pytest.fixture
def charged(tmp_path):
    """A real process, and the stand-in NVML charging it 4,706 MiB and a stranger 612 MiB."""
    lib = fake_nvml(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stranger = 4_000_000 + os.getpid() % 1000  # a pid no process here has, as NVML may name one
    (tmp_path / "charges").write_text(
        "gpu 0 GPU-fake-0 150000000000\n"
        f"proc 0 {proc.pid} {4706 * MIB}\nproc 0 {stranger} {612 * MIB}\n"
    )
    env = {**os.environ, "VMMTUI_NVML": str(lib), "VMMTUI_FAKE_NVML": str(tmp_path / "charges")}
    yield proc.pid, stranger, env
    proc.kill()
    proc.wait()


def attach(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", "attach", "--once", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_attach_once_prints_the_gpu_table_with_nvml_charges_and_what_was_found_held(charged):
    pid, stranger, env = charged
    res = attach(env, str(pid))
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert (
        "GPU 0 (GPU-fake-0): NVML charges 5,318 MiB of 5,318 MiB used to 2 processes; nothing orphaned"
        in out
    )
    row = next(line.split() for line in out.splitlines() if line.split()[:1] == [str(pid)])
    assert row[1:4] == ["python", "4,706", "MiB"] or row[2:4] == ["4,706", "MiB"], row
    assert any(line.split()[:3] == [str(stranger), "(not", "traced)"] for line in out.splitlines())
    assert f"NVML charges 4,706 MiB to pid {pid}" in out
    assert "the trace saw none of it made (the CUDA context" in out


def test_attach_once_json_has_the_table_after_the_reading(charged):
    pid, stranger, env = charged
    res = attach(env, "--json", str(pid))
    assert res.returncode == 0, res.stdout + res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.index("NvmlSample") < kinds.index("GpuTable")
    table = events[kinds.index("GpuTable")]
    rows = {r["pid"]: r for r in table["rows"]}
    assert rows[pid]["charged"] == 4706 * MIB and rows[pid]["accounted"] == 0
    assert rows[pid]["difference"] == 4706 * MIB
    assert rows[stranger]["charged"] == 612 * MIB
    assert table["charged"] == {"0": 5318 * MIB} and table["orphaned"] == {"0": 0}
