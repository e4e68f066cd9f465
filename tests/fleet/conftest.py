"""A real Prometheus server (Debian's ``prometheus``), started on localhost for one test with a
generated config that scrapes the agent under test every second."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PrometheusServer:
    url: str
    target_port: int

    def query(self, expr: str) -> list[dict]:
        q = urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{q}", timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expr: str, timeout: float = 30.0) -> list[dict]:
        """Poll the HTTP API until ``expr`` returns a sample (scrapes are every second)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            got = self.query(expr)
            if got:
                return got
            time.sleep(0.5)
        raise AssertionError(f"Prometheus never returned {expr!r} within {timeout} s")


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[PrometheusServer]:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no Prometheus server here (apt-get install prometheus)")
    target, web = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        f"  - job_name: vmmtui\n    static_configs: [{{targets: ['127.0.0.1:{target}']}}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{web}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "prometheus.log").open("w"),
    )
    url = f"http://127.0.0.1:{web}"
    try:
        end = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > end:
                pytest.fail(
                    "Prometheus did not start: " + (tmp_path / "prometheus.log").read_text()[-2000:]
                )
            time.sleep(0.2)
        yield PrometheusServer(url, target)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
