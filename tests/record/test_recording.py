"""Recordings: real memfd sessions written with --record and read back; every way a file can be bad."""

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.events_fixture import session_events
from vmmtui.config import SessionConfig
from vmmtui.events import Event, FdSnapshot, SessionClosed, StepDone
from vmmtui.record import FORMAT, Recorder, RecordingError, Timeline, gallery, make_header, read
from vmmtui.record.recording import LACKS
from vmmtui.steps import build_plan

PLAN = build_plan()


def vmmtui(*args, tmp=None):
    env = dict(os.environ)
    if tmp:
        env["TMPDIR"] = str(tmp)
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real default-size memfd session, recorded by `vmmtui run --record` (and its --json beside it)."""
    tmp = tmp_path_factory.mktemp("rec")
    path = tmp / "memfd.jsonl"
    res = vmmtui("run", "--backend", "memfd", "--record", str(path), "--json", tmp=tmp)
    assert res.returncode == 0, res.stderr
    return path, res.stdout


def test_a_recording_is_a_header_then_the_json_event_stream(recorded):
    path, stdout = recorded
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["vmmtui-recording"] == FORMAT and header["backend"] == "memfd"
    assert header["machine"]["hostname"] and header["machine"]["kernel"] and header["date"]
    assert header["options"]["size"] == 1 << 20 and header["options"]["mechanism"] == "vmm"
    # the same lines --json prints (one format), less fd tables that repeat the last one of their worker
    printed = stdout.splitlines()
    assert set(lines[1:]) <= set(printed)
    dropped = [json.loads(x) for x in printed if x not in set(lines[1:])]
    assert all(d["event"] in ("FdSnapshot", "KcmpVerdict") for d in dropped)


def test_a_recording_reads_back_into_the_events_and_a_frame_per_step(recorded):
    rec = read(recorded[0])
    assert rec.note == "" and rec.header.device == "CPU memory (memfd)"
    assert isinstance(rec.events[-1], SessionClosed) and rec.events[-1].clean
    timeline = Timeline(rec.events)
    assert [f.steps for f in timeline.frames] == [*range(len(PLAN) + 1), len(PLAN)]
    assert timeline.frames[0].next_step == PLAN[0] and timeline.frames[-2].finished
    assert (
        timeline.frames[-1].closing
        and timeline.frames[5].label == f"step 5: {PLAN[4][0]} · {PLAN[4][1]}"
    )
    # every step's StepDone lands in its own frame
    for k, frame in enumerate(timeline.frames[1 : len(PLAN) + 1]):
        before = timeline.frames[k].end
        assert any(
            isinstance(e, StepDone) and e.index == k for e in timeline.events[before : frame.end]
        )


def test_a_default_session_records_under_200_kib(recorded):
    assert os.path.getsize(recorded[0]) < 200 * 1024


def test_gzip_recordings_are_read_transparently(tmp_path, recorded):
    gz = tmp_path / "memfd.jsonl.gz"
    gz.write_bytes(gzip.compress(recorded[0].read_bytes()))
    assert [e.to_json() for e in read(gz).events] == [e.to_json() for e in read(recorded[0]).events]


def test_repeated_fd_tables_are_written_once(tmp_path):
    snap = next(e for e in session_events() if isinstance(e, FdSnapshot))
    rec = Recorder(tmp_path / "r.jsonl", make_header(SessionConfig(), "memfd", "test"))
    rec.write_all([snap, snap, snap])
    rec.close()
    assert len(read(tmp_path / "r.jsonl").events) == 1 and rec.skipped == 2


def test_the_bare_event_stream_is_format_1_read_with_a_note(recorded, tmp_path):
    old = tmp_path / "run.jsonl"
    old.write_text(recorded[1])
    rec = read(old)
    assert rec.note == LACKS[1] and "no header" in rec.note
    assert len(Timeline(rec.events).frames) == len(PLAN) + 2


def test_a_truncated_recording_names_its_line_and_exits_2(recorded, tmp_path):
    text = recorded[0].read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(text[: len(text) - 30])
    line = text[: len(text) - 30].count("\n") + 1
    res = vmmtui("replay", str(cut))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"line {line}: cut short (truncated)" in res.stderr and "Traceback" not in res.stderr


def test_a_corrupt_line_is_named(recorded, tmp_path):
    lines = recorded[0].read_text().splitlines()
    lines[7] = lines[7].replace('"event":"', '"event":"Bogus', 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordingError, match="line 8: corrupt: unknown event type"):
        read(bad)


@pytest.mark.parametrize(
    "content, says",
    [
        (b"", "is empty"),
        (b"hello world\n", "is not a vmmtui recording"),
        (b"\x1f\x8b\x08garbage", "is not a readable recording"),
        (b"\x00\xff\xfe binary", "is not a recording (binary data)"),
        (b'{"vmmtui-recording": 99}\n', "made by a newer vmmtui"),
    ],
)
def test_files_that_are_not_recordings_say_so(tmp_path, content, says):
    path = tmp_path / ("x.jsonl.gz" if content.startswith(b"\x1f\x8b") else "x.jsonl")
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=re.escape(says)):
        read(path)
    res = vmmtui("replay", str(path))
    assert res.returncode == 2 and says in res.stderr and res.stderr.count("\n") == 1


def test_a_missing_file_or_name_exits_2_listing_the_gallery():
    res = vmmtui("replay", "no-such-recording")
    assert (
        res.returncode == 2
        and "no gallery recording of that name" in res.stderr
        and "cpu-memfd-1mib" in res.stderr
    )


def test_the_gallery_lists_machine_driver_and_date_and_opens_by_prefix():
    res = vmmtui("replay", "--list")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    # each group's line says where, with which driver and when (from the recordings' headers)
    h100 = lines.index("NVIDIA H100 80GB HBM3 on vm · CUDA driver API 13.0 · 2026-11-23")
    assert lines[h100 + 1].split()[:2] == ["h100-consumers4-writes", "16:20"]
    memfd = next(i for i, line in enumerate(lines) if line.startswith("CPU memory (memfd) on "))
    assert "no GPU driver (memfd) · 20" in lines[memfd] and "cpu-memfd-1mib" in lines[memfd + 1]
    # the runs that verified come before the failure scenarios
    names = [line.split()[0] for line in lines[h100 + 1 :] if line.startswith("  ")]
    assert names.index("h100-vmm-1mib") < names.index("h100-scenario-intruder")
    assert lines[-1].startswith(f"{len(gallery.entries())} recordings, ")
    assert gallery.find("cpu-memfd").name.startswith("cpu-memfd-1mib")
    assert gallery.find("h100-vmm").name == "h100-vmm-1mib.jsonl.gz"  # the smallest size first
    rec = gallery.resolve("cpu-memfd")
    assert rec.header.backend == "memfd" and Timeline(rec.events).frames[-1].closing


def test_a_name_from_a_recording_header_is_listed_through_the_sanitiser(tmp_path):
    rec = (gallery.HERE / "cpu-memfd-1mib.jsonl.gz").read_bytes()
    lines = gzip.decompress(rec).decode().split("\n")
    header = json.loads(lines[0])
    header["machine"]["hostname"] = "evil\x1b]0;pwned\x07"
    (tmp_path / "x.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]))
    listed = gallery.listing(tmp_path)
    assert "\x1b" not in listed and "evil\\x1b]0;pwned\\x07" in listed


def test_pyproject_ships_every_gallery_file():
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["vmmtui"]
    for path in gallery.HERE.iterdir():
        if path.name.endswith(gallery.SUFFIXES):
            rel = path.relative_to(root / "vmmtui").as_posix()
            assert any(fnmatch.fnmatch(rel, g) for g in globs), rel


def test_the_gallery_stays_under_2_mib():
    assert (
        sum(p.stat().st_size for p in gallery.HERE.iterdir() if p.name.endswith(gallery.SUFFIXES))
        < 2 << 20
    )


def test_record_into_a_missing_directory_exits_2_before_any_worker(tmp_path):
    res = vmmtui(
        "run", "--backend", "memfd", "--record", str(tmp_path / "nope" / "r.jsonl"), tmp=tmp_path
    )
    assert (
        res.returncode == 2
        and "cannot write the recording" in res.stderr
        and res.stderr.count("\n") == 1
    )
    assert os.listdir(tmp_path) == []


def test_timeline_of_hand_made_events_without_step_started():
    events: list[Event] = session_events()
    timeline = Timeline(events)
    assert [f.steps for f in timeline.frames] == [*range(len(PLAN) + 1), len(PLAN)]


def test_a_failed_step_is_the_last_step_frame(tmp_path):
    path = tmp_path / "fail.jsonl.gz"
    res = vmmtui(
        "run",
        "--backend",
        "memfd",
        "--scenario",
        "consumer-dies",
        "--record",
        str(path),
        tmp=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    rec = read(path)
    assert (
        rec.header.options["scenario"] == "consumer-dies"
        and "scenario consumer-dies" in rec.header.title
    )
    frames = Timeline(rec.events).frames
    failed = [f for f in frames if f.label.endswith("(failed)")]
    assert len(failed) == 1 and failed[0].next_step is None and failed[0].failed
    assert frames[-1].closing and frames.index(failed[0]) == len(frames) - 2


def test_the_record_package_never_imports_textual():
    code = (
        "import sys, vmmtui.record, vmmtui.record.gallery, vmmtui.record.timeline\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
