"""The CUDA uprobes, checked without a GPU: a stand-in libcuda with the real signatures
(tests/fixtures/fake_libcuda.c) is called as a program would call the driver, traced with
``--libcuda``; every argument, output (through pointers, and a 64-byte handle passed by value on
the stack) and CUresult must come back as the program saw it (root, BTF, libbpf and a C compiler)."""

import sys
from pathlib import Path

import pytest

from tests.tracing import fake_libcuda, trace_recorded
from vmmtui.stream.observed import CapabilityProbe, CudaCall, LedgerFinding
from vmmtui.words.findings import finding_words as said

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def traced(ebpf, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cuda")
    lib = fake_libcuda(tmp)
    command = (sys.executable, str(FIXTURES / "fake_cuda_calls.py"), str(lib))
    res, events = trace_recorded(
        tmp / "trace.jsonl", "--libcuda", str(lib), "--", *command, timeout=120
    )
    line = next(x for x in res.stdout.splitlines() if x.startswith("CALLS "))
    h, fd, imported, opened, ptr, ipc = line.split()[1:]
    truth = {
        "h": int(h),
        "fd": int(fd),
        "imported": int(imported),
        "opened": int(opened),
        "ptr": int(ptr),
        "ipc": ipc,
    }
    return truth, events, res.stdout


def one(events, func, **kw):
    found = [
        e
        for e in events
        if isinstance(e, CudaCall)
        and e.func == func
        and all(getattr(e, k) == v for k, v in kw.items())
    ]
    assert len(found) == 1, (
        func,
        kw,
        [e for e in events if isinstance(e, CudaCall) and e.func == func],
    )
    return found[0]


def test_vmm_calls_come_back_with_their_arguments_and_outputs(traced):
    truth, events, _ = traced
    create = one(events, "cuMemCreate", handle_types=1)
    assert (create.size, create.device, create.handle_types, create.handle, create.result) == (
        2 << 20,
        3,
        1,
        truth["h"],
        0,
    )
    export = one(events, "cuMemExportToShareableHandle", result=0)
    assert (export.handle, export.fd, export.handle_types) == (truth["h"], truth["fd"], 1)
    imp = one(events, "cuMemImportFromShareableHandle")
    assert (imp.fd, imp.handle) == (42, truth["imported"])
    m = one(events, "cuMemMap")
    assert (m.ptr, m.size, m.handle) == (0x7F0000, 2 << 20, truth["imported"])
    a = one(events, "cuMemSetAccess")
    assert (a.ptr, a.device, a.flags) == (0x7F0000, 3, 3)
    assert one(events, "cuMemUnmap").size == 2 << 20
    assert one(events, "cuMemRelease").handle == truth["imported"]
    assert one(events, "cuMemAlloc_v2").ptr == truth["ptr"]
    assert one(events, "cuMemFree_v2").ptr == truth["ptr"]


def test_ipc_handle_bytes_on_both_sides(traced):
    truth, events, _ = traced
    got = one(events, "cuIpcGetMemHandle")
    assert (got.ptr, got.ipc) == (0x5000, truth["ipc"])
    opened = one(events, "cuIpcOpenMemHandle_v2")
    assert (opened.ipc, opened.ptr, opened.flags) == (
        truth["ipc"],
        truth["opened"],
        1,
    )  # by value, on the stack
    assert one(events, "cuIpcCloseMemHandle").ptr == truth["opened"]
    matched = [
        f
        for f in events
        if isinstance(f, LedgerFinding)
        and f.kind == "imported"
        and "64 handle bytes" in said(f).detail
    ]
    assert matched and matched[0].peer == got.pid


def test_a_failed_call_is_a_refusal_with_its_cause(traced):
    _, events, out = traced
    failed = one(events, "cuMemExportToShareableHandle", result=801)
    assert failed.handle_types == 8 and failed.fd == -1
    [refused] = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "refused"]
    assert "requestedHandleTypes" in said(refused).fix
    assert "CUDA_ERROR_NOT_SUPPORTED" in out


def test_a_fabric_probe_is_a_probe_not_a_refusal(traced):
    _, events, out = traced
    call = one(events, "cuMemCreate", handle_types=8)
    assert call.result == 800
    [probe] = [e for e in events if isinstance(e, CapabilityProbe)]
    assert (probe.pid, probe.ktime, probe.found) == (call.pid, call.ktime, "no-imex-channel")
    refused = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "refused"]
    assert not [f for f in refused if said(f).what.startswith("cuMemCreate")], refused
    assert "probe: pid" in out and "fabric handles unavailable here: no IMEX channel" in out


@pytest.fixture(scope="module")
def pool_traced(ebpf, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pool")
    lib = fake_libcuda(tmp)
    command = (sys.executable, str(FIXTURES / "fake_pool_calls.py"), str(lib))
    res, events = trace_recorded(
        tmp / "trace.jsonl", "--libcuda", str(lib), "--", *command, timeout=120
    )
    said = {x.split()[0]: x.split()[1:] for x in res.stdout.splitlines() if x[:1].isupper()}
    exporter = [int(v) for v in said["EXPORTER"]]
    importer = [int(v) for v in said["IMPORTER"]]
    return exporter, importer, said["DATA"], events


def findings(events, kind):
    return [f for f in events if isinstance(f, LedgerFinding) and f.kind == kind]


def test_pool_calls_come_back_with_their_arguments_and_outputs(pool_traced):
    (epid, efd, pool, p0, p1), (ipid, ifd, ipool, i0, i1), data, events = pool_traced
    create = one(events, "cuMemPoolCreate")
    assert (create.pid, create.handle, create.handle_types, create.device) == (epid, pool, 1, 2)
    allocs = [e for e in events if isinstance(e, CudaCall) and e.func == "cuMemAllocFromPoolAsync"]
    assert [(a.ptr, a.size, a.handle) for a in allocs] == [(p0, 1 << 20, pool), (p1, 1 << 20, pool)]
    export = one(events, "cuMemPoolExportToShareableHandle")
    assert (export.handle, export.fd, export.handle_types) == (pool, efd, 1)
    imp = one(events, "cuMemPoolImportFromShareableHandle")
    assert (imp.pid, imp.fd, imp.handle) == (ipid, ifd, ipool)
    exported = [e for e in events if isinstance(e, CudaCall) and e.func == "cuMemPoolExportPointer"]
    assert [(x.ptr, x.ipc) for x in exported] == [(p0, data[0]), (p1, data[1])]
    imported = [e for e in events if isinstance(e, CudaCall) and e.func == "cuMemPoolImportPointer"]
    assert [(x.pid, x.handle, x.ipc, x.ptr) for x in imported] == [
        (ipid, ipool, data[0], i0),
        (ipid, ipool, data[1], i1),
    ]
    assert one(events, "cuMemPoolDestroy").handle == pool
    frees = {
        (e.pid, e.ptr) for e in events if isinstance(e, CudaCall) and e.func == "cuMemFreeAsync"
    }
    assert frees == {(ipid, i0), (epid, p0), (epid, p1)}


def test_pool_fd_and_pointers_are_matched_to_their_exporter(pool_traced):
    (epid, efd, pool, *_), (ipid, ifd, ipool, i0, i1), _, events = pool_traced
    matched = findings(events, "imported")
    by_fd = [f for f in matched if f"imported as pool {ipool:#x}" in said(f).what]
    assert len(by_fd) == 1 and by_fd[0].peer == epid and f"pool {pool:#x}" in said(by_fd[0]).detail
    by_bytes = [f for f in matched if "64 export bytes" in said(f).detail]
    assert sorted(said(f).what for f in by_bytes) == sorted(
        f"pool pointer imported at {p:#x}" for p in (i0, i1)
    )
    assert all(f.pid == ipid and f.peer == epid for f in by_bytes)


def test_pool_leaks_and_an_importer_outliving_its_exporter(pool_traced):
    (epid, _, pool, *_), (ipid, _, ipool, i0, i1), _, events = pool_traced
    [never_freed] = findings(events, "pool-pointer-never-freed")
    assert (never_freed.pid, never_freed.peer) == (ipid, epid) and f"{i1:#x}" in said(
        never_freed
    ).what
    [never_destroyed] = findings(events, "pool-never-destroyed")  # the exporter destroyed its own
    assert never_destroyed.pid == ipid and f"{ipool:#x}" in said(never_destroyed).what
    [held] = findings(events, "held-after-exporter-died")
    assert (held.pid, held.peer) == (ipid, epid) and f"{i1:#x}" in said(held).detail


def test_a_pool_fd_inherited_across_exec_is_matched_to_its_export(ebpf, tmp_path):
    """No fd travels: children born with the exported fd (fork + exec) import it. The import's
    record names the fd's open file, read in the kernel at the call, so each import is the
    parent's pool, not "a pool not traced"."""
    lib = fake_libcuda(tmp_path)
    command = (sys.executable, str(FIXTURES / "inherited_pool.py"), str(lib), "2")
    res, events = trace_recorded(
        tmp_path / "trace.jsonl", "--libcuda", str(lib), "--", *command, timeout=120
    )
    lines = [x.split() for x in res.stdout.splitlines() if x[:1].isupper()]
    [(epid, _, pool)] = [tuple(map(int, x[1:])) for x in lines if x[0] == "EXPORTER"]
    importers = [tuple(map(int, x[1:])) for x in lines if x[0] == "IMPORTER"]
    assert len(importers) == 2
    export = one(events, "cuMemPoolExportToShareableHandle")
    imports = [
        e
        for e in events
        if isinstance(e, CudaCall) and e.func == "cuMemPoolImportFromShareableHandle"
    ]
    assert export.file and [i.file for i in imports] == [export.file] * 2
    matched = findings(events, "imported")
    for ipid, ifd, ipool in importers:
        [f] = [f for f in matched if f.pid == ipid]
        assert said(f).what == f"fd {ifd} imported as pool {ipool:#x}"
        assert f.peer == epid and f"pid {epid}'s pool {pool:#x}" in said(f).detail, f
