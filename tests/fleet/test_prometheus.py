"""``--prometheus``: a real Prometheus server scrapes a real agent watching real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from tests.attach.helpers import FIXTURES, ROOT
from tests.fleet.conftest import free_port

pytest.importorskip("prometheus_client", reason="prometheus-client not installed (vmmtui[fleet])")


def agent(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vmmtui", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def stop(p: subprocess.Popen) -> str:
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError("the agent did not stop within 10 s of SIGTERM") from None
    return err


def test_prometheus_scrapes_a_share_that_polling_saw(prometheus):
    """``attach --all --prometheus``: a fixture pair shares a memfd by SCM_RIGHTS; Prometheus'
    HTTP API then answers with the agent's transfer counter and its process-labelled series."""
    pair = subprocess.Popen(
        [sys.executable, str(FIXTURES / "scm_pair.py")],
        cwd=FIXTURES,
        env={**os.environ, "FIXTURE_HOLD": "2"},
        stdout=subprocess.DEVNULL,
    )
    a = agent("attach", "--all", "--prometheus", f"127.0.0.1:{prometheus.target_port}")
    try:
        got = prometheus.wait_for('vmmtui_fd_transfers_total{how="polled"} > 0', timeout=40)
        assert float(got[0]["value"][1]) >= 1
        events = prometheus.wait_for('vmmtui_events_total{mode="polling"}')
        assert float(events[0]["value"][1]) > 0
        up = prometheus.query('up{job="vmmtui"}')
        assert up and up[0]["value"][1] == "1"
    finally:
        pair.kill()
        pair.wait()
        err = stop(a)
    assert "Traceback" not in err, err


def test_a_busy_port_and_a_bad_address_are_one_line_each():
    port = free_port()
    first = agent("attach", "--all", "--prometheus", f"127.0.0.1:{port}")
    try:
        # the first agent is listening once /metrics answers
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1).read()
                break
            except OSError:
                import time

                time.sleep(0.1)
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "vmmtui",
                "attach",
                "--all",
                "--prometheus",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert second.returncode == 1, second
        assert second.stderr.count("\n") == 1 and "pick another port" in second.stderr
    finally:
        stop(first)
    bad = subprocess.run(
        [sys.executable, "-m", "vmmtui", "attach", "--all", "--prometheus", "localhost:99999"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert bad.returncode == 2 and "1..65535" in bad.stderr and "Traceback" not in bad.stderr
