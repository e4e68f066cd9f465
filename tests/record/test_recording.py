"""Recordings: real memfd sessions written with --record and read back; every way a file can be bad."""

import gzip
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import vmmtui
from tests.events_fixture import session_events
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.record import FORMAT, Recorder, RecordingError, Timeline, gallery, make_header, read
from vmmtui.record.recording import LACKS
from vmmtui.stream.events import Event, FdSnapshot, Notice, SessionClosed, StepDone

PLAN = build_plan()


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
    start = session_events()[0]
    snap = next(e for e in session_events() if isinstance(e, FdSnapshot))
    rec = Recorder(tmp_path / "r.jsonl", make_header(SessionConfig(), "memfd", "test"))
    rec.write_all([start, snap, snap, snap])
    rec.close()
    assert len(read(tmp_path / "r.jsonl").events) == 2 and rec.skipped == 2


def test_the_bare_event_stream_is_format_1_read_with_a_note(recorded, tmp_path):
    old = tmp_path / "run.jsonl"
    old.write_text(recorded[1])
    rec = read(old)
    assert rec.note == LACKS[1] and "no header" in rec.note
    assert len(Timeline(rec.events).frames) == len(PLAN) + 2


def test_a_recording_cut_mid_line_replays_up_to_its_cut_and_says_where(recorded, tmp_path):
    """A full disk or a kill mid-write leaves a last line written in part: the replay shows every
    event before it and says the line where it is cut (the recorder's message promises it)."""
    text = recorded[0].read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(text[: len(text) - 30])
    line = text[: len(text) - 30].count("\n") + 1
    rec = read(cut)
    assert len(rec.events) == line - 2  # the header, then every whole line before the cut
    assert rec.cut.startswith(f"cut short: line {line} was written in part")


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
    h100 = lines.index(
        "NVIDIA H100 80GB HBM3 · Intel Xeon host · CUDA driver API 13.0 · 2026-11-23"
    )
    assert lines[h100 + 1].split()[:2] == ["h100-consumers4-writes", "16:20"]
    memfd = next(i for i, line in enumerate(lines) if line.startswith("CPU memory (memfd) · "))
    assert "no GPU driver (memfd) · 20" in lines[memfd] and "cpu-memfd-1mib" in lines[memfd + 1]
    # the runs that verified come before the failure scenarios
    names = [line.split()[0] for line in lines[h100 + 1 :] if line.startswith("  ")]
    assert names.index("h100-vmm-1mib") < names.index("h100-scenario-intruder")
    assert lines[-1].startswith(f"{len(gallery.entries())} recordings, ")
    assert gallery.find("cpu-memfd-1").name.startswith("cpu-memfd-1mib")
    assert gallery.find("h100-vmm-1m").name == "h100-vmm-1mib.jsonl.gz"
    rec = gallery.resolve("cpu-memfd-1")
    assert rec.header.backend == "memfd" and Timeline(rec.events).frames[-1].closing


def test_a_name_from_a_recording_header_is_listed_through_the_sanitiser(tmp_path):
    rec = (gallery.HERE / "cpu-memfd-1mib.jsonl.gz").read_bytes()
    lines = gzip.decompress(rec).decode().split("\n")
    header = json.loads(lines[0])
    header["machine"]["cpu"] = "evil\x1b]0;pwned\x07"  # the listing names the CPU
    (tmp_path / "x.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]))
    listed = gallery.listing(tmp_path)
    # escaped where the recording is read, and again where the listing joins it with other words
    assert "\x1b" not in listed and "x1b]0;pwned" in listed


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


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def limited_replay(path, limit_bytes: int = 2 << 30):
    """``vmmtui replay PATH`` in a process that cannot have more than ``limit_bytes`` of memory."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "vmmtui", "replay", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=cap,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("where", ["header", "event"])
def test_a_value_nested_1000_deep_is_one_line_with_its_line_number(recorded, tmp_path, where):
    lines = recorded[0].read_text().splitlines()
    at = 0 if where == "header" else 5
    lines[at] = lines[at][:-1] + f',"extra":{nested(1000)}}}'
    deep = tmp_path / "deep.jsonl"
    deep.write_text("\n".join(lines) + "\n")
    with pytest.raises(RecordingError, match=f"line {at + 1}: values nested more than 32 deep"):
        read(deep)
    res = vmmtui("replay", str(deep))
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"line {at + 1}: values nested" in res.stderr and "Traceback" not in res.stderr


def test_brackets_inside_strings_are_not_nesting(recorded, tmp_path):
    lines = recorded[0].read_text().splitlines()
    # the line after the session's start (a Notice may come before it: a TMPDIR too long for a
    # socket path, the session directory moved)
    at = next(i for i, line in enumerate(lines) if '"SessionStarted"' in line) + 1
    lines[at] = json.dumps({"v": 1, "event": "Notice", "text": "[{" * 500 + ' \\" ' + "]}" * 500})
    path = tmp_path / "brackets.jsonl"
    path.write_text("\n".join(lines) + "\n")
    events = read(path).events
    started = next(i for i, e in enumerate(events) if type(e).__name__ == "SessionStarted")
    assert events[started + 1].text.startswith("[{[{")


def test_a_gzip_bomb_of_long_lines_is_refused_at_its_first_without_filling_memory(
    recorded, tmp_path
):
    """5 MB on disk, 5 GiB of blank lines (1 MiB each) once decompressed, after a real recording's
    lines: the reader stops at the first line longer than 256 KiB (one line naming it), in a
    process allowed 2 GiB of memory."""
    head = gzip.compress(recorded[0].read_bytes())
    member = gzip.compress(b" " * ((1 << 20) - 1) + b"\n", compresslevel=9)
    bomb = tmp_path / "bomb.jsonl.gz"
    with open(bomb, "wb") as f:
        f.write(head)
        for _ in range(5 << 10):  # gzip members one after another: one stream of 5 GiB
            f.write(member)
    assert bomb.stat().st_size < 8 << 20
    res = limited_replay(bomb)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr[-2000:]
    assert "longer than 256 KiB once decompressed" in res.stderr and "Traceback" not in res.stderr
    line = recorded[0].read_text().count("\n") + 1
    assert f"line {line}:" in res.stderr


def test_a_gzip_bomb_of_short_lines_is_refused_by_how_much_it_grows(recorded, tmp_path):
    """Blank lines of 1 KiB, 64 MiB of them from a few hundred KB: no line is too long, but the
    file grows past 200 times its size on disk, which no recording does; refused in one line, in
    a process allowed 2 GiB of memory."""
    head = gzip.compress(recorded[0].read_bytes())
    member = gzip.compress((b" " * 1023 + b"\n") * (16 << 10), compresslevel=9)  # 16 MiB
    bomb = tmp_path / "bomb.jsonl.gz"
    with open(bomb, "wb") as f:
        f.write(head)
        for _ in range(4):
            f.write(member)
    res = limited_replay(bomb)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr[-2000:]
    assert "times its size on disk once decompressed" in res.stderr, res.stderr


def test_a_plain_file_with_a_line_over_256_kib_is_refused_too(recorded, tmp_path):
    big = tmp_path / "big.jsonl"
    big.write_bytes(recorded[0].read_bytes() + b" " * (4 << 20) + b"\n")
    with pytest.raises(RecordingError, match=r"line \d+: longer than 256 KiB \(vmmtui's"):
        read(big)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full (a disk always full)")
@pytest.mark.parametrize("name", ["/dev/full", "/dev/full.gz"])
def test_a_full_disk_while_recording_is_one_line_and_exit_1_not_a_traceback(name, tmp_path):
    if name.endswith(".gz"):  # gzip buffers: the error comes at close, from a link to /dev/full
        os.symlink("/dev/full", tmp_path / "full.jsonl.gz")
        name = str(tmp_path / "full.jsonl.gz")
    res = vmmtui("run", "--backend", "memfd", "--size", "64KiB", "--record", name, tmp=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.stderr.count(f"cannot write the recording {name}: No space left on device") == 1
    assert "VERIFIED" in res.stdout  # the session itself ran to the end


def test_a_recording_cut_at_a_line_boundary_says_so(recorded, tmp_path):
    lines = recorded[0].read_text().splitlines(keepends=True)
    assert read(recorded[0]).cut == ""
    for keep in (3, len(lines) // 2, len(lines) - 1):
        cut = tmp_path / f"cut{keep}.jsonl"
        cut.write_text("".join(lines[:keep]))
        rec = read(cut)
        assert rec.cut.startswith(f"cut short: it ends at line {keep}, before the session's end")
        assert Timeline(rec.events).frames  # replayable as far as it goes


def test_a_recording_past_the_old_4_mib_limit_keeps_every_event_and_replays_whole(tmp_path):
    """The recorder once stopped at 4 MiB (a note, then nothing): 40 times the session's events,
    more than that limit held, gzipped or not, are all written and all read back, whole."""
    start, *events = [e for e in session_events() if not isinstance(e, SessionClosed)]
    closed = next(e for e in session_events() if isinstance(e, SessionClosed))
    for name in ("r.jsonl", "r.jsonl.gz"):
        rec = Recorder(tmp_path / name, make_header(SessionConfig(), "memfd", "test"))
        rec.write(start)
        rounds = 0
        while rounds * 2000 < 5 << 20:  # random text: it compresses as a recording's lines do
            rec.write_all([Notice(f"round {rounds}: {secrets.token_hex(1000)}")])
            rounds += 1
        rec.write(closed)
        rec.close()
        assert not rec.failed
        back = read(tmp_path / name)
        assert back.cut == "", back.cut
        said = [e.text for e in back.events if isinstance(e, Notice)]
        assert said[-1].startswith(f"round {rounds - 1}:") and len(said) >= rounds


MUTATIONS = ("flip", "delete", "duplicate", "truncate", "nest", "swap-type", "huge-number")


def mutate(text: str, rng) -> str:
    lines = text.splitlines()
    i = rng.randrange(len(lines))
    how = rng.choice(MUTATIONS)
    if how == "flip":
        line = bytearray(lines[i].encode())
        for _ in range(rng.randint(1, 4)):
            line[rng.randrange(len(line))] = rng.randrange(256)
        lines[i] = line.decode("utf-8", "replace")
    elif how == "delete":
        del lines[i]
    elif how == "duplicate":
        lines.insert(i, lines[rng.randrange(len(lines))])
    elif how == "truncate":
        lines[i] = lines[i][: rng.randrange(len(lines[i]))]
    elif how == "nest":
        lines[i] = re.sub(
            r":(\d+|\"[^\"]*\")", ":" + nested(rng.choice([40, 1000, 5000])), lines[i], count=1
        )
    elif how == "swap-type":
        lines[i] = (
            re.sub(r":(\d+)", r':"\1"', lines[i], count=1)
            if rng.random() < 0.5
            else re.sub(r':"([^"]*)"', r":[\1]", lines[i], count=1)
        )
    else:
        lines[i] = re.sub(r":(\d+)", ":" + "9" * 5000, lines[i], count=1)
    return "\n".join(lines) + "\n"


def test_200_mutated_recordings_read_or_say_why_in_one_line(recorded, tmp_path):
    """Whatever the damage, reading gives a Recording (whose frames can be drawn) or RecordingError."""
    import random

    rng = random.Random(19)
    text = recorded[0].read_text()
    path = tmp_path / "mutant.jsonl"
    for k in range(200):
        path.write_text(mutate(text, rng))
        try:
            Timeline(read(path).events).frames  # noqa: B018 - building the frames is the check
        except RecordingError as exc:
            assert "\n" not in str(exc) and str(path) in str(exc), (k, str(exc))


def test_gallery_recordings_open_with_their_session_not_with_another_runs_leftovers():
    from vmmtui.stream.events import Notice, SessionStarted

    for entry in gallery.entries():
        if entry.header.backend == "trace":  # a program traced: no session of vmmtui's
            continue
        events = read(entry.path).events
        assert isinstance(events[0], SessionStarted), (entry.name, events[0])
        swept = [e for e in events if isinstance(e, Notice) and "stale session dir" in e.text]
        assert not swept, entry.name


def test_a_gzip_recording_whose_recorder_died_replays_as_cut(tmp_path):
    """A killed recorder leaves its .gz without the trailer, flushed at the last batch of events."""
    events = [e for e in session_events() if not isinstance(e, SessionClosed)]
    rec = Recorder(tmp_path / "live.jsonl.gz", make_header(SessionConfig(), "memfd", "test"))
    rec.write_all(events[:10])
    rec.write_all(events[10:20])
    killed = tmp_path / "killed.jsonl.gz"
    killed.write_bytes((tmp_path / "live.jsonl.gz").read_bytes())  # as the kill left it
    written = rec.written  # repeated fd tables are left out
    rec.close()
    back = read(killed)
    assert len(back.events) == written
    assert back.cut.startswith(f"cut short: it ends at line {written + 1}, before the session's")
    half = tmp_path / "half.jsonl.gz"
    half.write_bytes((tmp_path / "live.jsonl.gz").read_bytes()[:20])
    with pytest.raises(RecordingError, match="is not a readable recording"):
        read(half)  # not even the header survived
