"""``--prometheus``: a real Prometheus server scrapes a real agent watching real processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from tests.fleet.conftest import free_port
from tests.trace.procfs.helpers import FIXTURES, ROOT

#: the slow tier: left out of the default run (README), run by .ci/run after it
#: serial: the agent watches every process of the machine (--all)
pytestmark = [pytest.mark.slow, pytest.mark.serial]

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
    """``attach --all --prometheus``: the agent is up, then a fixture pair shares a memfd by
    SCM_RIGHTS; Prometheus' HTTP API answers with the share the agent proved (kcmp) and with its
    own scrape of the agent."""
    a = agent("attach", "--all", "--prometheus", f"127.0.0.1:{prometheus.target_port}")
    pair = None
    try:
        prometheus.wait_for('vmmtui_events_total{mode="polling"}', timeout=60)
        pair = subprocess.Popen(
            [sys.executable, str(FIXTURES / "scm_pair.py")],
            cwd=FIXTURES,
            env={**os.environ, "FIXTURE_HOLD": "3"},
            stdout=subprocess.DEVNULL,
        )
        got = prometheus.wait_for('vmmtui_polled_shares_total{kind="memfd"} > 0', timeout=60)
        assert float(got[0]["value"][1]) >= 1
        up = prometheus.query('up{job="vmmtui"}')
        assert up and up[0]["value"][1] == "1"
    finally:
        if pair is not None:
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


def test_the_grafana_dashboard_asks_prometheus_only_what_the_agent_exports(prometheus):
    """Every panel's PromQL parses on a real Prometheus and names only metrics the collector
    emits (so an import of docs/grafana/vmmtui-sharing.json shows data, not 'No data' forever)."""
    import json
    import re
    import threading

    from prometheus_client import CollectorRegistry

    from vmmtui.fleet.facts import SharingFacts
    from vmmtui.fleet.prometheus import LedgerCollector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(LedgerCollector(SharingFacts(), threading.Lock()))
    exported = {s.name for fam in registry.collect() for s in fam.samples} | {
        fam.name + ("_total" if fam.type == "counter" else "") for fam in registry.collect()
    }
    dash = json.loads((ROOT / "docs" / "grafana" / "vmmtui-sharing.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 8
    for expr in exprs:
        for name in re.findall(r"\bvmmtui_[a-z_]+", expr):
            assert name in exported, f"{name} (in {expr!r}) is not a metric the agent exports"
        prometheus.query(expr)  # raises unless Prometheus parses and runs it


def test_an_ipv6_endpoint_says_a_url_that_answers():
    from vmmtui.fleet.prometheus import MetricsEndpoint

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
            port = s.getsockname()[1]
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    endpoint = MetricsEndpoint.start(f"[::1]:{port}")
    try:
        assert endpoint.url == f"http://[::1]:{port}/metrics"
        assert b"vmmtui" in urllib.request.urlopen(endpoint.url, timeout=5).read()
    finally:
        endpoint.close()


@pytest.mark.parametrize("host", ["no-such-host.invalid", "192.0.2.1"])
def test_an_address_not_of_this_machine_is_bad_input_in_one_line(host):
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "attach", "--all", "--prometheus", f"{host}:9464"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{host} is not an address of this machine" in res.stderr
    assert "pick another port" not in res.stderr
