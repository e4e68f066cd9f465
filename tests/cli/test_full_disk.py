"""Files whole or refused: every file vmmtui writes, on a file system that fills while it writes
(a 64 KiB tmpfs, mounted here: root only), is either whole under its name or not there at all,
said in one line with a non-zero exit; a recording is the one file kept cut, and it replays up to
its cut as its message says. Nothing is left beside it (no temporary file)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.commands import vmmtui

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def full(tmp_path):
    """A 64 KiB tmpfs with one page left: the next file of more than 4 KiB fills it."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    where = tmp_path / "small"
    where.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)])
    if res.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        filler = where / "filler"
        with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as f:
            while True:
                f.write(b"x" * 4096)
        os.truncate(filler, max(0, filler.stat().st_size - 4096))  # one page free
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)])


def left_beside(where: Path) -> list[str]:
    return sorted(p.name for p in where.iterdir() if p.name != "filler")


def test_a_transcript_on_a_full_disk_is_not_claimed_written(full, tmp_path):
    res = vmmtui(
        "replay", "h100-vmm-1mib", "--transcript", str(full / "t.md"), cwd=tmp_path, timeout=180
    )
    assert res.returncode == 1, res.stdout + res.stderr
    assert "wrote" not in res.stdout and "nothing was written" in res.stderr
    assert left_beside(full) == []


def test_a_perfetto_file_on_a_full_disk_is_refused_with_exit_1(full, tmp_path):
    out = full / "trace.json"
    res = vmmtui(
        "replay", "h100-trace-torch-expandable", "--perfetto", str(out), cwd=tmp_path, timeout=180
    )
    assert res.returncode == 1 and "nothing was written" in res.stderr, res.stderr
    assert left_beside(full) == []


def _ebpf() -> None:
    from vmmtui.trace.loader import why_not

    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")


@pytest.mark.slow
def test_a_trace_whose_recording_and_perfetto_fill_the_disk_exits_1_and_replays_to_the_cut(
    full, tmp_path
):
    _ebpf()
    rec, perf = full / "trace.jsonl", full / "trace.json"
    load = [sys.executable, str(FIXTURES / "memfd_flood.py"), "400", "0"]
    res = vmmtui(
        "trace",
        "--no-cuda",
        "--record",
        str(rec),
        "--perfetto",
        str(perf),
        "--",
        *load,
        cwd=tmp_path,
        timeout=180,
    )
    assert res.returncode == 1, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert f"cannot write the recording {rec}: No space left on device" in res.stderr
    assert f"cannot write {perf}: No space left on device; nothing was written" in res.stderr
    assert left_beside(full) == ["trace.jsonl"]  # the recording, cut; no Perfetto file
    from vmmtui.record.recording import read

    cut = read(rec)  # replayable up to its cut, as the message said
    assert cut.events and cut.cut.startswith("cut short")


@pytest.mark.slow
def test_a_cast_that_fills_the_disk_is_not_left_half_written(full, tmp_path):
    from tests.tui.terminal import Terminal

    cast = full / "replay.cast"
    term = Terminal(
        tmp_path, "replay", "h100-vmm-1mib", "--cast", str(cast), "--autoplay", "--pace", "0.01"
    )
    try:
        term.wait_for("REPLAY")
        time.sleep(2)
        term.press("q")
        assert term.ended_within(20) is not None
        assert term.proc.returncode == 1, term.text[-1500:]
        assert f"cannot write the cast {cast}" in term.text
        assert left_beside(full) == []
    finally:
        term.close()


def test_write_whole_on_a_full_disk_leaves_nothing_and_keeps_the_old_file(full):
    from vmmtui.system.atomic import write_whole

    old = full / "result.json"
    old.write_text("{}")
    with pytest.raises(OSError):
        write_whole(old, "x" * (16 << 10))
    assert old.read_text() == "{}" and left_beside(full) == ["result.json"]
