"""The refcount book on real processes, traced with eBPF through the stand-in libcuda
(fake_libcuda.c): each finding is said live, while the process it is about still waits (the
fixture blocks until this test has read the finding on the trace's output), and the pinned
bytes of an exporter that leaks one buffer per step grow one buffer per step (root, BTF, libbpf,
a C compiler)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.tracing import fake_libcuda
from vmmtui.model.findings import Weight
from vmmtui.model.policy import weigh
from vmmtui.pipeline.replay import read
from vmmtui.stream.observed import CudaCall, LedgerFinding, PinnedBytes
from vmmtui.words.findings import finding_words

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIB = 1 << 20


@pytest.fixture(scope="module")
def lib(ebpf, tmp_path_factory) -> Path:
    return fake_libcuda(tmp_path_factory.mktemp("refs"))


def trace(lib: Path, tmp: Path, mode: str, *args: str, go: dict[str, str], extra=()):
    """Run the fixture under ``vmmtui trace``; when a line of the trace's output holds a key of
    ``go``, the file ``go[key]`` is made (the fixture waits for it). The lines, with the time
    each go file was made, and the recording."""
    rec = tmp / f"{mode}.jsonl"
    cmd = [sys.executable, "-m", "vmmtui", "trace", "--libcuda", str(lib), "--record", str(rec),
           *extra, "--", sys.executable, str(FIXTURES / "refcount_share.py"), str(lib), str(tmp),
           mode, *args]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    made: dict[str, int] = {}

    def read_lines() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            for key, name in go.items():
                if key in line and name not in made:
                    made[name] = len(lines)
                    (tmp / name).touch()

    reader = threading.Thread(target=read_lines)
    reader.start()
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    assert proc.returncode == 0, "".join(lines)
    return lines, made, read(rec).events


def findings(events, kind):
    return [f for f in events if isinstance(f, LedgerFinding) and f.kind == kind]


def calls(events, func, pid=None):
    return [
        e for e in events
        if isinstance(e, CudaCall) and e.func == func and (pid is None or e.pid == pid)
    ]  # fmt: skip


def said(lines, word):
    return [line for line in lines if line.startswith(word)]


def test_one_import_of_two_left_each_step_is_said_as_growth_live_and_pinned_bytes_grow(
    lib, tmp_path
):
    """Two imports a step, one released: a buffer more pinned each step. A second import is a
    reference the driver counts, no finding by itself; the pile is: growth, said at the fourth
    step (three alike before it) while the importer waits (before it exits), with the bytes it
    pins."""
    lines, made, events = trace(lib, tmp_path, "steps", "4", go={"growth:": "go-grown"})
    assert "go-grown" in made, "".join(lines)
    finding = made["go-grown"] - 1  # the index of the line that said it
    # live: said while the importer waited at step 4, before anything was released at step 4
    [released] = [i for i, line in enumerate(lines) if "RELEASED 4" in line]
    assert finding < released
    [grown] = findings(events, "growth")  # 4 pieces: not a quarter more than said, no update
    importer = grown.pid
    exporter = grown.peer
    assert grown.size == 4 * MIB and grown.opens == [0, 1, 2, 3, 4]
    fourth = calls(events, "cuMemExportToShareableHandle", exporter)[3]
    imported = calls(events, "cuMemImportFromShareableHandle", importer)[6]
    assert fourth.ktime < grown.ktime <= imported.ktime  # the fourth step's fd, as it arrived
    assert "4 MiB" in finding_words(grown).what
    assert not findings(events, "opened-twice") and not findings(events, "freed-while-mapped")
    pins = [p.bytes for p in events if isinstance(p, PinnedBytes) and p.pid == exporter]
    assert pins[:3] == [MIB, 2 * MIB, 3 * MIB], pins
    shares = findings(events, "imported")
    assert {(f.road, f.exported_as, f.imported_as) for f in shares} == {
        ("scm-rights", "posix-fd", "posix-fd")
    }
    # the exit names each import left: one per step
    assert len(findings(events, "import-never-released")) == 4


def test_nccls_free_retain_release_unmap_release_while_the_peer_maps_is_no_finding(lib, tmp_path):
    """NCCL's cuMem road, healthy: an export per buffer closed at once, the importer mapping
    it while the exporter frees with cuMemRetainAllocationHandle + cuMemRelease + cuMemUnmap +
    cuMemRelease. Every call is legal by the driver's documentation: nothing to look at."""
    lines, _, events = trace(lib, tmp_path, "nccl", "3", go={})
    assert len(said(lines, "FREED")) == 3 and len(said(lines, "DONE")) == 3, "".join(lines)
    assert len(calls(events, "cuMemRetainAllocationHandle")) == 3
    kinds = {f.kind for f in events if isinstance(f, LedgerFinding)}
    assert kinds == {"shared", "imported"}, [
        finding_words(f).what for f in events if isinstance(f, LedgerFinding)
    ]
    assert any("verdict: nothing to look at" in line for line in lines), "".join(lines[-5:])


def test_an_importer_that_maps_after_its_exporter_was_killed_is_said_live(lib, tmp_path):
    lines, made, events = trace(lib, tmp_path, "kill", go={"held-after-exporter-died:": "go-died"})
    assert "go-died" in made, "".join(lines)
    [held] = said(lines, "HELD")
    assert made["go-died"] - 1 < lines.index(held)  # said while the importer still waited
    [f] = findings(events, "held-after-exporter-died")
    assert f.pid == int(held.split()[1])


def test_never_imported_a_second_release_and_a_legacy_export_of_vmm(lib, tmp_path):
    lines, made, events = trace(
        lib,
        tmp_path,
        "misc",
        go={"NEVER ": "go-never"},
        extra=("--never-imported-after", "0.5"),
    )
    assert "go-never" in made, "".join(lines)
    # an export nobody imported is the exporter's own memory: a fact (model/policy.py), counted
    [never] = findings(events, "exported-never-imported")
    assert never.proof == "struct file" and weigh(never) is Weight.QUIET
    [twice] = findings(events, "released-twice")
    assert "cuMemRelease" in finding_words(twice).what
    assert said(lines, "SECOND-RELEASE") and said(lines, "SECOND-RELEASE")[0].split()[2] == "1"
    [legacy] = findings(events, "legacy-export-of-vmm")
    assert "cuMemExportToShareableHandle" in finding_words(legacy).fix
    assert said(lines, "LEGACY 1")
    assert not [
        f for f in findings(events, "refused") if "cuIpcGetMemHandle" in finding_words(f).what
    ]


def test_a_second_legacy_open_refused_already_mapped_is_said_while_the_importer_waits(
    lib, tmp_path
):
    lines, made, events = trace(lib, tmp_path, "ipc", go={"opened-twice:": "go-ipc"})
    assert "go-ipc" in made, "".join(lines)
    [again] = said(lines, "OPENED-AGAIN")
    assert again.split()[2] == "208"  # CUDA_ERROR_ALREADY_MAPPED, as the driver answers
    [twice] = findings(events, "opened-twice")
    refused = [e for e in calls(events, "cuIpcOpenMemHandle_v2") if e.result == 208]
    assert [twice.ktime] == [e.ktime for e in refused] and twice.proof == "handle bytes"
    assert twice.pid == int(again.split()[1])
    assert not findings(events, "refused")


def test_a_legacy_free_its_importer_closes_within_the_teardown_window_is_a_quiet_fact(
    lib, tmp_path
):
    """Both sides tear down together (as NCCL's legacy p2p road does): the exporter frees its
    IPC memory, its importer closes it 0.3 s later. The CUDA docs leave that order undefined, so
    the fact is kept, quiet and in the past: nothing to look at."""
    lines, _, events = trace(lib, tmp_path, "teardown", "0.3", go={})
    assert said(lines, "FREED") and said(lines, "CLOSED"), "".join(lines)
    assert not findings(events, "freed-while-mapped"), "".join(lines)
    [quiet] = findings(events, "freed-at-teardown")
    [freed] = said(lines, "FREED")
    [closed] = said(lines, "CLOSED")
    assert (quiet.pid, quiet.peer) == (int(freed.split()[1]), int(closed.split()[1]))
    assert 0.25e9 < quiet.gap_ns < 2e9 and quiet.via == "closed"
    assert "both sides tore down together" in finding_words(quiet).detail
    assert any("verdict: nothing to look at" in line for line in lines), "".join(lines[-5:])


def test_a_legacy_free_its_importer_still_holds_past_the_window_is_said_live(lib, tmp_path):
    """The importer keeps the freed memory open: freed-while-mapped, said while it still holds
    it (it closes only once the trace has said so), with the delay since the free."""
    lines, made, events = trace(
        lib, tmp_path, "teardown", "wait", go={"freed-while-mapped:": "go-freed"}
    )
    assert "go-freed" in made, "".join(lines)
    [closed] = said(lines, "CLOSED")
    assert made["go-freed"] - 1 < lines.index(closed)  # said while the importer held it
    [problem] = findings(events, "freed-while-mapped")
    assert problem.gap_ns >= 2e9 and problem.via == ""
    assert "still held it" in finding_words(problem).detail
    assert not findings(events, "freed-at-teardown")
