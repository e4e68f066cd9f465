"""The capability probe's process as the inspector's start sees it (no GPU needed: a stand-in prints the line)."""

import os
import sys
import time

from vmmtui.backends import cuda_unusable
from vmmtui.backends.probe import DeviceRecord, ProbeRecord, first_json_line, record
from vmmtui.stream.codec import encode


def test_the_line_is_taken_before_the_probe_exits_and_the_probe_is_reaped(tmp_path):
    """A GPU probe tears the driver down after printing; the start must not wait for that."""
    gate = tmp_path / "gate"
    code = (
        "import json, os, sys, time; print(json.dumps({'driver': True, 'devices': [], 'pid': os.getpid()}), "
        f"flush=True)\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.01)"
    )
    found = first_json_line([sys.executable, "-c", code], timeout=30)
    pid = found["pid"]
    assert found["driver"] is True
    with open(f"/proc/{pid}/stat") as f:
        assert f.read().rsplit(")", 1)[1].split()[0] != "Z"  # still running: the line came first
    gate.touch()
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not os.path.exists(
        f"/proc/{pid}"
    )  # exited and reaped by the background wait (no zombie)


def test_a_probe_that_dies_without_a_line_says_why():
    found = first_json_line(
        [sys.executable, "-c", "import sys; sys.exit('no driver for you')"], timeout=30
    )
    assert found == {
        "driver": True,
        "error": "the CUDA probe failed: no driver for you",
        "devices": [],
    }


def test_a_probe_that_hangs_is_killed_at_the_deadline():
    found = first_json_line([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    assert found["error"] == "the CUDA probe did not finish within 1 s"


def test_the_probes_line_is_read_back_typed_and_a_wrong_shape_says_so():
    """The probe's JSON comes back as a ProbeRecord (checked by the codec), never a dict by key."""
    line = (
        "import json; print(json.dumps({'driver': True, 'driver_version': 13000, 'devices': "
        "[{'index': 0, 'name': 'NVIDIA H100', 'vmm': True, 'posix_fd': True, 'mem_total': 8}]}))"
    )
    rec = record(first_json_line([sys.executable, "-c", line], timeout=30))
    assert rec == ProbeRecord(
        True, None, 13000, [DeviceRecord(0, "NVIDIA H100", vmm=True, posix_fd=True, mem_total=8)]
    )
    assert rec.driver_api == "CUDA driver API 13.0"
    assert cuda_unusable(rec, 0) is None and "does not exist" in cuda_unusable(rec, 1)
    bad = record({"driver": True, "devices": [{"index": "0", "name": "x"}]})
    assert not bad.devices and "not understood" in bad.error and "index" in bad.error
    assert cuda_unusable(bad, 0) == bad.error
    assert record(encode(rec)) == rec  # what _main prints is what probe() reads
