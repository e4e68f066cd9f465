"""Every non-zero status of ``vmmtui trace`` has its word, and q has the screen's status: a
--duration that ends the trace while the command still runs says so (exit 1: the command has no
status of its own); q while the probes load says the command did not run (exit 0, as q is).
Before, both exited 1 without a word. Real eBPF (slow tier)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "tui"))
from terminal import Terminal  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _ebpf():
    from vmmtui.trace.loader import why_not

    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")


def test_a_duration_that_outlasts_the_command_is_said(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--no-cuda", "-q", "--duration", "1", "--"]
        + ["sleep", "30"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        cwd=tmp_path,
        timeout=60,
    )
    assert res.returncode == 1, res.stderr
    assert "--duration 1 s ended the trace while the command still ran" in res.stderr


def test_q_while_the_probes_load_says_the_command_did_not_run(tmp_path):
    marker = tmp_path / "ran"
    term = Terminal(tmp_path, "trace", "--", "touch", str(marker), width=120, height=40)
    try:
        term.wait_for("STARTING", 60)
        term.press("q")  # at once: the probes load after the first frame, in about a second
        assert term.ended_within(20) is not None
        assert term.proc.returncode == 0, term.text[-1500:]  # q's status, started or not
        if "quit while the trace was starting" not in term.text:
            pytest.skip("the trace had started before q was read (q then stops the command)")
        time.sleep(0.5)
        assert not marker.exists()
    finally:
        term.close()
