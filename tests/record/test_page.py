"""replay --html: one self-contained page, checked in a real headless Chromium from file:// (skipped
without Chromium), and every bad output path refused before any work."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.commands import vmmtui
from vmmtui.record import Timeline, gallery
from vmmtui.render.page import PageFrame, build, offline_svg

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
NOTES = "# Lecture 4\n\n## start\nWatch the fd tables.\n\n## 8\nThe fd is a handle.\n\n## end\nAll released.\n"


def test_the_page_fetches_nothing_and_nothing_from_the_recording_can_end_its_script():
    svg = '<svg><style>src: local("FiraCode-Regular"),\n  url("https://cdn.example/f.woff2") format("woff2");</style></svg>'
    assert "https:" not in offline_svg(svg) and 'local("FiraCode-Regular")' in offline_svg(svg)
    frame = PageFrame(svg, "step 1: producer · init", 1, "producer", note=("x", "</script><b>"))
    page = build([frame], title="<host>", subtitle="t", steps=1)
    assert page.count("</script>") == 2 and "<b>" not in page and "&lt;host&gt;" in page
    assert "default-src 'none'" in page and "https://" not in page
    data = page.split('<script id="data" type="application/json">')[1].split("</script>")[0]
    assert json.loads(data)["frames"][0]["note"]["text"] == "</script><b>"


@pytest.mark.parametrize(
    "target, says",
    [
        ("nodir/out.html", "directory nodir does not exist"),
        (".", "name a .html file"),
        ("sub.html", "is a directory"),
        ("out.txt", "name a .html file"),
        ("ro/out.html", "cannot write"),
    ],
)
def test_a_bad_html_path_is_one_line_and_exit_2_before_any_work(tmp_path, target, says):
    (tmp_path / "sub.html").mkdir()
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.geteuid() == 0 and target.startswith("ro/"):
        pytest.skip("root writes anywhere")
    # the recording does not exist either: the path is checked first
    res = vmmtui("replay", "no-such-recording", "--html", target, cwd=tmp_path, timeout=180)
    assert res.returncode == 2 and says in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert sorted(os.listdir(tmp_path)) == ["ro", "sub.html"]


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install -y chromium)")
def test_the_page_opens_from_disk_steps_with_the_keys_and_ends_passed(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    page = tmp_path / "lecture.html"
    res = vmmtui("replay", "h100-vmm-1mib", "--notes", str(notes), "--html", str(page), timeout=180)
    assert res.returncode == 0 and f"wrote {page}: 25 frames" in res.stdout, res.stderr
    assert page.stat().st_size < 1 << 20
    shot = tmp_path / "page.png"
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "browser-screenshot.py"),
            "--page",
            str(page),
            "--keys",
            "ArrowRight,ArrowRight,ArrowLeft,End,Home,End",
            "--text",
            "PASSED",
            "--out",
            str(shot),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.splitlines()[-1])
    assert seen["frames"] == [0, 1, 2, 1, 24, 0, 24]
    assert seen["text_seen"]
    assert seen["position"] == "closed · after step 23 of 23 · the end"
    assert seen["note"] == "All released." and seen["network"] == [] and seen["errors"] == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_drawing_leaves_no_page_and_one_line(tmp_path, sig, code):
    page = tmp_path / "lecture.html"
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "replay", "h100-consumers4-writes", "--html", str(page)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stdin=subprocess.DEVNULL,
    )
    time.sleep(6)  # drawing its 65 frames takes longer than this
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code and err == "vmmtui: interrupted; nothing was left running\n", err
    assert not page.exists() and os.listdir(tmp_path) == []


def browse(page: Path, keys: str, size: str, out: Path) -> dict:
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "browser-screenshot.py"),
            "--page",
            str(page),
            "--keys",
            keys,
            "--text",
            "REPLAY",
            "--size",
            size,
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install -y chromium)")
def test_the_page_offers_only_its_own_keys_scrolls_its_log_and_is_readable_at_1024_px(tmp_path):
    """The page once showed the terminal's footer (g, /, a, f, s, q, ?) where only ←, →, Home, End
    and space worked; its log was part of the picture and could not scroll; at 1024 px its text
    was about 5 px high."""
    from vmmtui.tui.keys import page_keys

    notes = tmp_path / "notes.md"
    notes.write_text(NOTES)
    page = tmp_path / "lecture.html"
    res = vmmtui("replay", "h100-vmm-1mib", "--notes", str(notes), "--html", str(page), timeout=180)
    assert res.returncode == 0, res.stderr
    said = [f"{k['shown']} {k['description']}" for k in page_keys()]
    for size in ("1024x768", "1920x1080"):
        seen = browse(page, "ArrowRight,bracketright,End", size, tmp_path / f"page-{size}.png")
        seen_keys = seen["keys"].replace("\xa0", " ")
        assert all(s in seen_keys for s in said), seen["keys"]
        for absent in ("Screenshot", "Autoplay", "Search", "Go to", "Quit", "(f"):
            assert absent not in seen_keys and absent not in seen["text"], absent
        assert seen["frames"][:3] == [0, 1, 8]  # "]": the next frame with a note (step 8)
        assert seen["text_px"] >= 12, (size, seen["text_px"])
        # the whole frame, the buttons, the keys and the note, with no scrolling
        assert seen["on_screen"] == ["#frame svg", "#next", "#keys", "#note"], (size, seen)
        assert seen["log_scrolls"] and seen["log_at_end"] and seen["log_lines"] > 100


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install -y chromium)")
def test_the_frame_the_keys_and_a_long_note_fit_1024x768_and_1920x1080(tmp_path):
    """At 1024x768 the frame was taller than the window and the keys, the buttons and the
    teacher's note were below it, out of sight; at 1920x1080 the frame's last rows were."""
    page = tmp_path / "lecture.html"
    notes = ROOT / "docs" / "lecture-notes.md"
    res = vmmtui("replay", "h100-vmm-1mib", "--notes", str(notes), "--html", str(page), timeout=180)
    assert res.returncode == 0, res.stderr
    for size in ("1024x768", "1920x1080"):
        for keys in ("ArrowRight,ArrowRight,ArrowRight", "End"):  # a long note; the last frame
            seen = browse(page, keys, size, tmp_path / f"fit-{size}-{keys[:3]}.png")
            assert seen["on_screen"] == ["#frame svg", "#next", "#keys", "#note"], (size, seen)
            assert seen["text_px"] >= 12 and seen["note"], (size, seen)


def test_every_frame_of_the_page_is_named_once():
    """The last step and the close were both "step 23 of 23"."""
    from vmmtui.render.page import PageFrame, positions

    timeline = Timeline(gallery.resolve("h100-vmm-1mib").events)
    frames = [PageFrame("", f.label, f.steps) for f in timeline.frames]
    said = positions(frames, len(timeline.plan))
    assert len(set(said)) == len(said) == len(frames)
    assert said[0] == "start · before step 1 of 23"
    assert said[-2:] == ["step 23 of 23: producer · cleanup", "closed · after step 23 of 23"]
    twice = positions([PageFrame("", "closed", 3), PageFrame("", "closed", 3)], 3)
    assert twice == [
        "closed · after step 3 of 3 · frame 1 of 2",
        "closed · after step 3 of 3 · frame 2 of 2",
    ]
