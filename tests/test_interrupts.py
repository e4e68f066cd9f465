"""Ctrl-C (SIGINT to the process group), SIGTERM and SIGHUP at several moments of a run: one line,
exit 128 + signal, no traceback, no worker, nothing left in TMPDIR."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest


def start(tmp_path, *args):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "run", "--backend", "memfd", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("delay", [0.05, 0.6, 1.2, 2.0])
@pytest.mark.parametrize(
    "signum,to_group", [(signal.SIGINT, True), (signal.SIGTERM, False), (signal.SIGHUP, False)]
)
def test_interrupt_stops_everything_and_says_where(tmp_path, delay, signum, to_group):
    proc = start(tmp_path, "--size", "256MiB")
    time.sleep(delay)
    workers = descendants(proc.pid)
    if to_group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")  # a fast machine: nothing to interrupt
    if proc.returncode == -signum and not out and not err:
        # the signal beat the interpreter to vmmtui's first line: nothing of ours existed yet
        assert not workers and os.listdir(tmp_path) == []
        return
    assert proc.returncode == 128 + signum, (out, err)
    assert "Traceback" not in out + err and "KeyboardInterrupt" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vmmtui: interrupted"), err
    time.sleep(0.2)
    assert not [
        p for p in workers if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
    ]
    assert os.listdir(tmp_path) == []
