"""What the tests of the tracer share, written once: whether eBPF can trace on this machine, the
stand-in libcuda, and ``vmmtui trace`` run on a real program as a user runs it.

The ``ebpf`` fixture (tests/conftest.py) skips a test where :func:`ebpf_refused` says why; a test
that only needs the reason (a skip mark, a word in its id) calls the function."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.pipeline.replay import read
from vmmtui.stream.events import Event

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@functools.cache
def ebpf_refused() -> str | None:
    """Why ``vmmtui trace`` cannot use eBPF here (None: it can). What the machine lacks (x86_64,
    the capabilities, BTF, libbpf, the object), else a real load of the probe that the kernel
    refused: the verifier is the last word, so the probe is loaded and closed once per test
    process (a fifth of a second) rather than trusted from the checks alone."""
    from vmmtui.trace.loader import Probe, ProbeUnavailable, why_not

    if reason := why_not():
        return reason
    try:
        Probe().close()
    except ProbeUnavailable as exc:
        return str(exc)
    return None


def fake_libcuda(where: Path) -> Path:
    """The stand-in libcuda (fixtures/fake_libcuda.c: the driver's entry points the probes hook,
    on CPU) built as ``where/libcuda.so.1``; skips the test where no C compiler is installed."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    lib = where / "libcuda.so.1"
    src = str(FIXTURES / "fake_libcuda.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), src], check=True)
    return lib


def fake_nvml(where: Path) -> Path:
    """The stand-in NVML (fixtures/fake_nvml.c: what NVML charges each process, read from the
    file ``VMMTUI_FAKE_NVML`` names) built as ``where/libnvidia-ml.so.1``, for ``VMMTUI_NVML``;
    skips the test where no C compiler is installed."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in NVML")
    lib = where / "libnvidia-ml.so.1"
    src = str(FIXTURES / "fake_nvml.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), src], check=True)
    return lib


def vmmtui_trace(
    *args: str, timeout: float = 180, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``vmmtui trace ARGS`` as a user runs it (``python -m vmmtui``), its output kept as text;
    ``env`` is added to ours."""
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )


def said(res: subprocess.CompletedProcess[str]) -> str:
    """The end of what a run wrote, for an assertion's message."""
    return res.stdout[-2000:] + res.stderr[-2000:]


def trace_recorded(
    rec: Path, *args: str, timeout: float = 180, ok: bool = True
) -> tuple[subprocess.CompletedProcess[str], list[Event]]:
    """``vmmtui trace --record REC ARGS`` (ARGS end with ``-- COMMAND``) and the events its
    recording holds, read back as any reader reads them; ``ok``: the trace must exit 0."""
    res = vmmtui_trace("--record", str(rec), *args, timeout=timeout)
    if ok:
        assert res.returncode == 0, said(res)
    assert rec.exists(), said(res)
    return res, read(rec).events


def stream(res: subprocess.CompletedProcess[str]) -> list[dict]:
    """The JSON objects of ``trace --json``'s stdout, one a line."""
    return [json.loads(line) for line in res.stdout.splitlines()]


def truth(res: subprocess.CompletedProcess[str]) -> list[dict]:
    """What a fixture program says it did (its ``TRUTH {json}`` lines), to hold the trace to.
    The program shares its stdout with the tracer's: a line of the tracer's written while the
    program's was in the pipe may follow it on the same line, so only the object is read."""
    decode = json.JSONDecoder().raw_decode
    return [decode(line[6:])[0] for line in res.stdout.splitlines() if line.startswith("TRUTH ")]


def trace_program(
    tmp_path: Path,
    program: Path,
    *args: str,
    extra: tuple[str, ...] = (),
    timeout: float = 180,
    ok: bool = True,
) -> tuple[subprocess.CompletedProcess[str], list[dict], list[Event]]:
    """A fixture program run by this Python under ``vmmtui trace -q --no-cuda --record``
    (``extra``: more of trace's options): the run, what the program says it did (its TRUTH
    lines) and the recording's events."""
    rec = tmp_path / "trace.jsonl"
    command = (sys.executable, str(program), *args)
    res, events = trace_recorded(
        rec, "-q", "--no-cuda", *extra, "--", *command, timeout=timeout, ok=ok
    )
    return res, truth(res), events


def trace_share(
    tmp_path: Path, *args: str, extra: tuple[str, ...] = (), timeout: float = 180
) -> tuple[subprocess.CompletedProcess[str], list[dict], list[Event]]:
    """fixtures/trace_share.py traced (its case and counts in ``args``), which must say what it
    did: the ground truth each trace test holds the kernel's record to."""
    res, told, events = trace_program(
        tmp_path, FIXTURES / "trace_share.py", *args, extra=extra, timeout=timeout, ok=False
    )
    assert told, said(res)
    return res, told, events
