"""The CUDA uprobes, checked without a GPU: a stand-in libcuda with the real signatures
(tests/fixtures/fake_libcuda.c) is called as a program would call the driver, traced with
``--libcuda``; every argument, output (through pointers, and a 64-byte handle passed by value on
the stack) and CUresult must come back as the program saw it (root, BTF, libbpf and a C compiler)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.record.recording import read
from vmmtui.trace.events import CudaCall, LedgerFinding

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    from vmmtui.trace.loader import why_not

    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    tmp = tmp_path_factory.mktemp("cuda")
    lib = tmp / "libcuda.so.1"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(FIXTURES / "fake_libcuda.c")],
        check=True,
    )
    rec = tmp / "trace.jsonl"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmmtui",
            "trace",
            "--libcuda",
            str(lib),
            "--record",
            str(rec),
            "--",
            sys.executable,
            str(FIXTURES / "fake_cuda_calls.py"),
            str(lib),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stdout + res.stderr
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
    return truth, read(rec).events, res.stdout


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
    create = one(events, "cuMemCreate")
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
        if isinstance(f, LedgerFinding) and f.kind == "imported" and "64 handle bytes" in f.detail
    ]
    assert matched and matched[0].peer == got.pid


def test_a_failed_call_is_a_refusal_with_its_cause(traced):
    _, events, out = traced
    failed = one(events, "cuMemExportToShareableHandle", result=801)
    assert failed.handle_types == 8 and failed.fd == -1
    [refused] = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "refused"]
    assert "requestedHandleTypes" in refused.fix
    assert "CUDA_ERROR_NOT_SUPPORTED" in out
