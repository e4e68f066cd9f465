"""The floor and the peer, timed in the same run as vmmtui's own paths.

- ``c_floor``: ``tests/fixtures/vmm_pair.cu`` built with nvcc and run as ``vmm_pair --bench SIZE N``:
  the same driver calls and kernels as vmmtui's VMM path, in C, with warm contexts, timed inside the
  program (create → ACK), each run with its own listen/connect/accept as each vmmtui session has.
  Nothing can share this way faster; vmmtui's path is shown as a ratio of it.
- ``torch``: torch.multiprocessing CUDA IPC, warm (``vmmtui.bench.torch_ipc`` in a subprocess, so
  that torch is never imported here): fill, share, verify on the GPU, ACK. What users would
  otherwise reach for.

Each skips with its reason (no nvcc, not a checkout, no torch, no GPU); nothing here is asserted.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vmmtui.bench.result import PathSummary, stats

PEER_PATHS = ("c_floor", "torch")
SOURCE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "vmm_pair.cu"
KERNELS = Path(__file__).resolve().parents[1] / "backends" / "pattern_kernels.cu"
#: seconds for one size's runs (a 16 GiB fill and verify is well under a second on an H100)
RUN_TIMEOUT = 180


def build_c_floor() -> tuple[Path | None, str]:
    """The vmm_pair binary (built once per source, in the temporary directory), or None and why not."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return (
            None,
            "nvcc is not on the PATH (the C floor is built from tests/fixtures/vmm_pair.cu)",
        )
    if not SOURCE.is_file() or not KERNELS.is_file():
        return None, f"{SOURCE} not found: run the bench from a checkout of vmmtui"
    digest = hashlib.sha256(SOURCE.read_bytes() + KERNELS.read_bytes()).hexdigest()[:12]
    binary = Path(tempfile.gettempdir()) / f"vmmtui-vmm_pair-{os.getuid()}-{digest}"
    if binary.is_file():
        return binary, ""
    partial = binary.with_suffix(f".{os.getpid()}")
    try:
        done = subprocess.run(
            [nvcc, "-O2", "-o", str(partial), str(SOURCE), "-lcuda"],
            capture_output=True,
            text=True,
            timeout=300,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvcc failed: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        partial.unlink(missing_ok=True)
        return None, f"nvcc failed ({done.returncode}): {last[:160]}"
    partial.replace(binary)
    return binary, ""


def _lines(cmd: list[str], env: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    """The JSON lines a peer program printed, or why there are none."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT, env=env)
    except subprocess.TimeoutExpired:
        return [], f"no answer within {RUN_TIMEOUT} s"
    except OSError as exc:
        return [], f"could not run {cmd[0]}: {exc}"
    rows = []
    for line in done.stdout.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    if done.returncode != 0 and not rows:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return [], last[:200]
    return rows, ""


def c_floor(size: int, repeat: int, device: int, binary: Path) -> tuple[list[float], int, str]:
    """(milliseconds a run, runs verified, why none) for the C floor at ``size``."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": str(device)}
    rows, why = _lines([str(binary), "--bench", str(size), str(repeat)], env)
    return [r["ms"] for r in rows], sum(bool(r.get("verified")) for r in rows), why


def torch_missing() -> str | None:
    return None if importlib.util.find_spec("torch") else "torch is not installed for this Python"


def torch_ipc(sizes: list[int], repeat: int, device: int) -> tuple[dict[int, dict[str, Any]], str]:
    """{size: {"ms": [...], "verified": n}} for torch.multiprocessing IPC, or why none."""
    cmd = [sys.executable, "-m", "vmmtui.bench.torch_ipc", str(device), str(repeat)]
    rows, why = _lines([*cmd, *map(str, sizes)], dict(os.environ))
    if rows and "skip" in rows[0]:
        return {}, rows[0]["skip"]
    return {int(r["size"]): r for r in rows if "size" in r}, why


def measure(
    sizes: list[int],
    repeat: int,
    device: int,
    skip: Callable[[str, int, str], None],
    progress: Callable[[str], None],
) -> dict[str, dict[int, PathSummary]]:
    """Both rows at every size in ``sizes`` (already those that fit): {path: {size: summary}}."""
    from vmmtui.stream.sizes import format_size

    out: dict[str, dict[int, PathSummary]] = {p: {} for p in PEER_PATHS}
    binary, why = build_c_floor()
    for size in sizes:
        if binary is None:
            skip("c_floor", size, why)
            continue
        ms, ok, why_not = c_floor(size, repeat, device, binary)
        if not ms:
            skip("c_floor", size, f"vmm_pair --bench failed: {why_not}")
            continue
        floor = out["c_floor"][size] = PathSummary(f"{ok}/{len(ms)}", stats(ms))
        progress(f"C floor {format_size(size):>9}: create→ACK median {floor.e2e_ms.median:.3f} ms")
    missing = torch_missing()
    found, why = ({}, missing) if missing else torch_ipc(sizes, repeat, device)
    for size in sizes:
        row = found.get(size)
        if not row or not row.get("ms"):
            skip("torch", size, why or "torch_ipc gave no figure")
            continue
        peer = out["torch"][size] = PathSummary(
            f"{row['verified']}/{len(row['ms'])}", stats(row["ms"])
        )
        progress(f"torch   {format_size(size):>9}: share→ACK median {peer.e2e_ms.median:.3f} ms")
    return out
