"""Recordings made to hang, crash or mislead the reader: each is refused (or read) in one line, at
once, in a real `vmmtui replay` process; none leaves a traceback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.commands import vmmtui
from tests.events_fixture import session_events
from vmmtui.record import RecordingError, gallery, read

#: generous: the reader takes milliseconds; the old one took minutes to hours on these
QUICK = 20


def one_line(res: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert res.returncode == code, res.stderr[-2000:]
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr[-2000:]
    return res.stderr


def lines_of(events) -> list[str]:
    header = json.dumps({"vmmtui-recording": 2, "format": 2, "events_version": 1})
    return [header, *(e.to_json() for e in events)]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


#: a line a quadratic string-skipping pattern took minutes over: a string never closed whose every
#: quote is escaped, under more brackets than the limit
def unclosed(length: int) -> str:
    return "[" * 40 + '"' + '\\"' * (length // 2)


def test_a_200_kb_line_of_escaped_quotes_is_refused_at_once(tmp_path):
    lines = lines_of(session_events())
    lines.insert(3, unclosed(200_000))
    res = vmmtui("replay", str(write(tmp_path / "quotes.jsonl", lines)), timeout=QUICK)
    assert "line 4: values nested more than 32 deep" in one_line(res)


def test_a_small_gzip_that_decompresses_to_4_mib_of_such_a_line_is_refused_at_once(tmp_path):
    lines = lines_of(session_events())
    body = ("\n".join(lines[:3]) + "\n" + unclosed((4 << 20) - 64 * 1024) + "\n").encode()
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(body, compresslevel=9))
    assert bomb.stat().st_size < 16 << 10 and len(body) < 4 << 20
    assert "line 4: longer than 256 KiB once decompressed" in one_line(
        vmmtui("replay", str(bomb), timeout=QUICK)
    )


def test_a_lone_surrogate_is_escaped_in_the_transcript(tmp_path):
    lines = lines_of(session_events())
    lines.insert(3, '{"v":1,"event":"Notice","text":"lone \\udfff here"}')
    rec = write(tmp_path / "lone.jsonl", lines)
    out = tmp_path / "out.md"
    res = vmmtui("replay", str(rec), "--transcript", str(out), timeout=QUICK)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert "lone \\udfff here" in out.read_text(encoding="utf-8")


@pytest.mark.parametrize("flag", [[], ["--html", "p.html"], ["--transcript", "t.md"]])
def test_a_recording_without_its_session_started_is_refused_in_one_line(tmp_path, flag):
    events = [e for e in session_events() if type(e).__name__ != "SessionStarted"]
    rec = write(tmp_path / "headless.jsonl", lines_of(events))
    err = one_line(vmmtui("replay", str(rec), *flag, cwd=tmp_path, timeout=QUICK))
    assert "has no SessionStarted" in err and not (tmp_path / "p.html").exists()


def test_a_reversed_recording_says_it_is_reversed_not_cut_short(tmp_path):
    lines = lines_of(session_events())
    rec = write(tmp_path / "tac.jsonl", lines[::-1])
    err = one_line(vmmtui("replay", str(rec), timeout=QUICK))
    assert "reverse" in err and "cut short" not in err
    # its events reversed under a header in its place: the session ends before it starts
    rec = write(tmp_path / "body.jsonl", [lines[0], *lines[:0:-1]])
    err = one_line(vmmtui("replay", str(rec), timeout=QUICK))
    assert "reverse order" in err and "cut short" not in err


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "rec.jsonl"
    os.mkfifo(fifo)
    assert "is a FIFO (named pipe), not a recording file" in one_line(
        vmmtui("replay", str(fifo), timeout=QUICK)
    )
    with pytest.raises(RecordingError, match="FIFO"):
        read(fifo)


def test_a_device_is_refused(tmp_path):
    assert "/dev/zero is a character device" in one_line(
        vmmtui("replay", "/dev/zero", timeout=QUICK)
    )
    gz = tmp_path / "zero.jsonl.gz"
    gz.symlink_to("/dev/zero")
    assert "is a character device" in one_line(vmmtui("replay", str(gz), timeout=QUICK))


def test_an_ambiguous_gallery_prefix_lists_the_recordings_it_names_and_exits_2():
    err = one_line(vmmtui("replay", "h100-vmm", timeout=QUICK))
    assert "h100-vmm names 2 gallery recordings: h100-vmm-1gib, h100-vmm-1mib" in err
    with pytest.raises(RecordingError, match="names 2"):
        gallery.find("h100-vmm")
    assert gallery.find("h100-vmm-1m").name == "h100-vmm-1mib.jsonl.gz"


def test_a_worker_or_step_its_session_did_not_announce_is_refused_in_one_line(tmp_path):
    """A panel per worker: a name the session never started (or a step past its plan) would be
    drawn from nothing; it is refused where the recording is read."""
    lines = lines_of(session_events())
    at = next(i for i, line in enumerate(lines) if '"WorkerStarted"' in line)
    lines[at] = lines[at].replace('"role":"producer"', '"role":"x y"')
    err = one_line(
        vmmtui(
            "replay", str(write(tmp_path / "who.jsonl", lines)), "--html", "p.html", timeout=QUICK
        )
    )
    assert f"line {at + 1}: WorkerStarted names a worker 'x y' that its session did not" in err
    lines = lines_of(session_events())
    at = next(i for i, line in enumerate(lines) if '"StepDone"' in line)
    lines[at] = lines[at].replace('"index":0', '"index":99', 1)
    err = one_line(vmmtui("replay", str(write(tmp_path / "far.jsonl", lines)), timeout=QUICK))
    assert f"line {at + 1}: step 100 of a plan of" in err


def test_a_second_session_in_one_file_is_refused(tmp_path):
    lines = lines_of(session_events())
    err = one_line(
        vmmtui("replay", str(write(tmp_path / "two.jsonl", [*lines, *lines[1:]])), timeout=QUICK)
    )
    assert "a second SessionStarted (the first is at line 2)" in err


def test_a_teachers_notes_reach_the_transcript_escaped_and_a_fifo_is_refused(tmp_path):
    rec = write(tmp_path / "r.jsonl", lines_of(session_events()))
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\r\n\r\n## 1\r\n\r\nsee \x1b]0;PWNED\x07 here\u202e\r\n")
    res = vmmtui(
        "replay",
        str(rec),
        "--notes",
        str(notes),
        "--transcript",
        "t.md",
        cwd=tmp_path,
        timeout=QUICK,
    )
    assert res.returncode == 0, res.stderr
    text = (tmp_path / "t.md").read_text()
    assert "see \\x1b]0;PWNED\\x07 here\\u202e" in text and "\x1b" not in text and "\r" not in text
    fifo = tmp_path / "notes.fifo"
    os.mkfifo(fifo)
    err = one_line(
        vmmtui("replay", str(rec), "--notes", str(fifo), "--transcript", "t.md", timeout=QUICK)
    )
    assert "is not a regular file (a FIFO" in err
