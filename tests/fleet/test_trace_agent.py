"""``vmmtui trace --all --prometheus … --otlp …``: the eBPF node agent, scraped by a real Prometheus
while real programs share memfds and are refused pidfd_getfd across namespaces; and ``--perfetto``
and ``--otlp`` of a real trace. Needs root, BTF and libbpf (CI runs as root): skipped elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fleet.test_otlp import Collector
from tests.fleet.test_prometheus import stop
from tests.trace.procfs.helpers import ROOT
from tests.tracing import vmmtui_trace

#: the slow tier: left out of the default run (README), run by .ci/run after it
#: serial: the agent traces every process of the machine (--all)
pytestmark = [pytest.mark.slow, pytest.mark.serial]

FIXTURE = ROOT / "tests" / "fixtures" / "trace_share.py"


@pytest.fixture(scope="module", autouse=True)
def agent_can_run(ebpf):
    pytest.importorskip("prometheus_client", reason="prometheus-client not installed")


def fixture(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(FIXTURE), *args], capture_output=True, text=True, timeout=60
    )


def test_the_ebpf_agent_is_scraped_with_transfers_and_a_refusal_by_reason(prometheus):
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vmmtui",
            "trace",
            "--all",
            "--no-cuda",
            "-q",
            "--prometheus",
            f"127.0.0.1:{prometheus.target_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        prometheus.wait_for('vmmtui_events_total{mode="ebpf"} > 0', timeout=60)
        assert fixture("rate", "2", "100").returncode == 0
        pidns = fixture("pidns")
        if pidns.returncode != 0 and "unshare" in pidns.stderr:
            pytest.skip(f"no PID namespaces here: {pidns.stderr.strip()[-200:]}")
        got = prometheus.wait_for('vmmtui_fd_transfers_total{how="SCM_RIGHTS"} >= 100', timeout=30)
        assert float(got[0]["value"][1]) >= 100
        refused = prometheus.wait_for('vmmtui_refused_calls_total{call="pidfd_getfd"}', timeout=30)
        assert refused[0]["metric"]["reason"] in ("pid-namespace", "uid", "capability", "other")
    finally:
        err = stop(agent)
    assert "Traceback" not in err, err


def test_a_real_trace_to_perfetto_and_otlp(tmp_path):
    c = Collector()
    try:
        out = tmp_path / "t.json"
        otlp = f"http://127.0.0.1:{c.server_port}"
        command = (sys.executable, str(FIXTURE), "scm", "5")
        res = vmmtui_trace(
            "-q", "--no-cuda", "--perfetto", str(out), "--otlp", otlp, "--", *command,
            timeout=120, env={"PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert res.returncode == 0, res.stderr
    finally:
        c.shutdown()
        c.server_close()
    body = json.loads(out.read_text())["traceEvents"]
    from tests.render.test_perfetto import check_shape

    check_shape(body)
    assert sum(1 for e in body if e["ph"] == "s") >= 5  # a flow per fd sent and received
    files = [s for s in c.spans if s.name == "shared file"]
    assert len(files) >= 5  # one OpenTelemetry trace per memfd shared
    transfers = [s for s in c.spans if s.name == "transfer SCM_RIGHTS"]
    assert len(transfers) >= 5
    assert {s.trace_id for s in transfers} <= {s.trace_id for s in files}


def test_bad_exporter_options_are_one_line_each(tmp_path):
    for args, code, says in (
        (["--prometheus", "x:99999"], 2, "1..65535"),
        (["--otlp", "collector:4318"], 2, "http"),
        (["--perfetto", "/nonexistent/t.json"], 2, "no directory"),
    ):
        res = subprocess.run(
            [sys.executable, "-m", "vmmtui", "trace", *args, "--", "true"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert res.returncode == code and says in res.stderr, (args, res.stderr)
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
