"""The GPU ledger on real processes, traced with eBPF through the stand-in libcuda and the
stand-in NVML (fixtures/gpu_charges.py: the LMCache#4014 pattern on CPU): NVML's charges as the
H200 made them (the creator, then the importer once the creator is killed) beside who holds
what; the recording replayed gives the same ledger (root, BTF, libbpf, a C compiler)."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

from tests.tracing import fake_libcuda, fake_nvml, trace_recorded
from vmmtui.model.gpu_ledger import GpuLedger, Kind, of_world
from vmmtui.pipeline.session import TraceSession
from vmmtui.stream.gpu import GpuTable, NvmlSample

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIB = 1 << 20
VMM, LEGACY, CONTEXT = 64 * MIB, 32 * MIB, 300 * MIB


@pytest.fixture(scope="module")
def libs(ebpf, tmp_path_factory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("gpu")
    return fake_libcuda(where), fake_nvml(where)


def run(libs, tmp: Path, mode: str):
    """The fixture under ``vmmtui trace`` with the stand-in NVML: its pids, and the GPU ledger
    at each NVML reading of the recording, replayed."""
    cuda, nvml = libs
    os.environ["VMMTUI_NVML"] = str(nvml)
    os.environ["VMMTUI_FAKE_NVML"] = str(tmp / "charges")
    (tmp / "charges").write_text(
        "version 0\ngpu 0 GPU-fake-0 150000000000\n"
    )  # the GPU, no process
    try:
        res, events = trace_recorded(
            tmp / f"{mode}.jsonl", "--libcuda", str(cuda), "--",
            sys.executable, str(FIXTURES / "gpu_charges.py"), str(cuda), mode,
        )  # fmt: skip
    finally:
        del os.environ["VMMTUI_NVML"], os.environ["VMMTUI_FAKE_NVML"]
    said = dict(line.split()[:2] for line in res.stdout.splitlines() if line[:1].isupper())
    session = TraceSession.replay(events)
    at_readings: list[GpuLedger] = []
    folded = False  # the stream gives an event just before the world folds it
    replayed = []
    for e in itertools.chain(session.events(), [None]):
        if folded:
            at_readings.append(of_world(session.world))
        folded = isinstance(e, NvmlSample) and any(g.charges for g in e.gpus)
        replayed += [e] if isinstance(e, GpuTable) else []
    # the replay makes the same tables as the live run made (the panel, --json, the text)
    assert replayed == [e for e in events if isinstance(e, GpuTable)]
    assert len(replayed) == len([e for e in events if isinstance(e, NvmlSample)])
    run.stdout = res.stdout  # type: ignore[attr-defined]
    return int(said["EXPORTER"]), int(said["IMPORTER"]), at_readings


def test_the_exporter_killed_while_the_importer_holds_its_memory_is_charged_to_the_importer_and_named_orphaned(
    libs, tmp_path
):
    exporter, importer, readings = run(libs, tmp_path, "kill")
    assert len(readings) == 2, readings
    before, after = readings
    (gpu,) = before.gpus
    rows = {r.pid: r for r in gpu.rows}
    assert exporter in rows, (exporter, importer, gpu)
    assert rows[exporter].charged == CONTEXT + VMM + LEGACY
    assert rows[exporter].created == VMM + LEGACY
    assert rows[exporter].pinned_for_others == VMM + LEGACY
    assert rows[exporter].by_kind == {Kind.VMM: VMM, Kind.IPC: LEGACY}
    assert rows[importer].charged == CONTEXT
    assert rows[importer].imported == VMM + LEGACY and rows[importer].orphaned == 0
    assert (rows[importer].imports, rows[importer].ipc_opens) == (1, 1)
    assert {s.creator for s in rows[importer].shares} == {exporter}
    assert gpu.orphaned == 0
    # the world accounts for all but the contexts it never saw made: both numbers, the difference
    assert [rows[p].difference for p in (exporter, importer)] == [CONTEXT, CONTEXT]

    (gpu,) = after.gpus
    rows = {r.pid: r for r in gpu.rows}
    assert not rows[exporter].alive and rows[exporter].charged is None
    assert rows[importer].charged == CONTEXT + VMM + LEGACY
    assert rows[importer].orphaned == VMM + LEGACY
    assert all(not s.creator_alive and s.creator_gone_at for s in rows[importer].shares)
    assert gpu.orphaned == VMM + LEGACY
    assert rows[importer].difference == CONTEXT
    # the trace's text says it as the table and the sentence, with the exporter gone
    text = run.stdout  # type: ignore[attr-defined]
    assert (
        "GPU 0 (GPU-fake-0): NVML charges 396 MiB of 396 MiB used to 1 process; 96 MiB orphaned"
        in text
    )
    assert f"NVML charges 396 MiB to pid {importer} python" in text
    assert f"64 MiB of VMM from pid {exporter} (exited " in text
    assert f"32 MiB of legacy IPC from pid {exporter} (exited " in text
    assert "96 MiB orphaned: no living creator owns it, this process pins it" in text


def test_a_healthy_share_shows_nothing_orphaned_and_nothing_held_after_the_importer_let_go(
    libs, tmp_path
):
    exporter, importer, readings = run(libs, tmp_path, "healthy")
    assert readings, "no NVML reading in the recording"
    for ledger in readings:
        for gpu in ledger.gpus:
            assert gpu.orphaned == 0
            assert all(r.orphaned == 0 for r in gpu.rows)
    rows = {r.pid: r for r in readings[0].gpus[0].rows}
    assert rows[exporter].pinned_for_others == VMM + LEGACY
