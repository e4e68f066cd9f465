"""``--perfetto``: a recording or a trace becomes Chrome JSON that Perfetto's UI imports: a named
track per process, slices, and flows whose ends sit inside slices of the right processes."""

import json
import subprocess
import sys

from tests.fleet.test_facts import EXP, IMP, gpu_share_events
from vmmtui.pipeline.replay import resolve
from vmmtui.pipeline.session import TraceSession
from vmmtui.render import perfetto


def check_shape(body: list[dict]) -> None:
    slices = [e for e in body if e["ph"] == "X"]
    named = {e["pid"] for e in body if e["ph"] == "M" and e["name"] == "process_name"}
    assert slices and {e["pid"] for e in slices} <= named
    for e in slices:
        assert e["dur"] > 0 and e["ts"] >= 0 and isinstance(e["tid"], int)
    starts = {e["id"]: e for e in body if e["ph"] == "s"}
    ends = {e["id"]: e for e in body if e["ph"] == "f"}
    assert starts.keys() == ends.keys()
    for fid, s in starts.items():
        f = ends[fid]
        assert f["ts"] >= s["ts"] and f["bp"] == "e"
        for end in (s, f):  # each end binds to a slice of its own thread enclosing its time
            assert any(
                x["pid"] == end["pid"]
                and x["tid"] == end["tid"]
                and x["ts"] <= end["ts"] <= x["ts"] + x["dur"]
                for x in slices
            ), end


def test_a_session_recording_has_a_track_per_worker_and_flows_producer_to_consumer(tmp_path):
    rec = resolve("cpu-memfd-1mib")
    out = tmp_path / "s.json"
    perfetto.write(out, rec.events)
    body = json.loads(out.read_text())["traceEvents"]
    check_shape(body)
    flows = [e for e in body if e["ph"] == "s"]
    assert {f["name"] for f in flows} == {
        "fd: producer → consumer",
        "allocation: producer → consumer",
    }
    steps = [e["name"] for e in body if e["ph"] == "X"]
    assert "export" in steps and "import" in steps and "cuMemCreate" not in steps  # memfd calls
    assert any(s.startswith("memfd_create") for s in steps)


def test_a_trace_has_calls_as_slices_and_flows_for_the_fd_and_the_allocation(tmp_path):
    """Perfetto's file is a projection of the run's stream (each event, then what the world
    found in it): its flows are the world's matches, drawn without a fold of its own."""
    out = tmp_path / "t.json"
    stream = list(TraceSession.replay(gpu_share_events(exporter_exits=False)).events())
    perfetto.write(out, stream)
    body = json.loads(out.read_text())["traceEvents"]
    check_shape(body)
    flows = {e["name"]: (e["pid"]) for e in body if e["ph"] == "s"}
    assert flows == {"fd 7 → fd 9": EXP, "export → import": EXP}
    assert {e["pid"] for e in body if e["ph"] == "f"} == {IMP}


def test_replay_perfetto_writes_the_file_or_says_why_not(tmp_path):
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmmtui",
            "replay",
            "cpu-memfd-1mib",
            "--perfetto",
            str(tmp_path / "x.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0 and "ui.perfetto.dev" in ok.stdout
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "vmmtui",
            "replay",
            "cpu-memfd-1mib",
            "--perfetto",
            "/nonexistent/x.json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
