"""A teacher's notes (replay --notes): the format, bound to a real recording's steps, and every
way a notes file can be wrong (one line, exit 2)."""

import os
import subprocess
import sys

import pytest

from vmmtui.record import Timeline, gallery
from vmmtui.record.notes import NotesError, bind, read, split

NOTES = """# Lecture 4: one allocation, two processes

## start
Two processes, no shared memory yet.

## 8
The fd is a handle to the allocation.

```
## not a heading: inside a fence
```
### a sub-heading is part of the note

## consumer · receive
The fd arrived.

## step 19: consumer · verify
Every integer checked.

## wait_ack ##
The producer waits.

## end
Nothing left behind.
"""


@pytest.fixture(scope="module")
def timeline():
    return Timeline(gallery.resolve("h100-vmm-1mib").events)


def test_each_heading_lands_on_the_frame_of_its_step(timeline):
    notes = bind(*split(NOTES), timeline)
    assert notes.title == "Lecture 4: one allocation, two processes"
    got = {n.label: (n.frame, n.text) for n in notes.chapters()}
    assert list(got) == [
        "start",
        "step 8: producer · export",
        "step 14: consumer · receive",
        "step 19: consumer · verify",
        "step 21: producer · wait_ack",
        "end",
    ]
    assert got["start"][0] == 0 and got["end"][0] == len(timeline) - 1
    assert timeline.frames[got["step 8: producer · export"][0]].label.startswith("step 8: ")
    assert "## not a heading" in got["step 8: producer · export"][1]
    assert got["step 8: producer · export"][1].endswith("### a sub-heading is part of the note")
    assert notes.at(got["step 14: consumer · receive"][0]).text == "The fd arrived."


@pytest.mark.parametrize(
    "text, says",
    [
        ("## 8\nx\n## exprot\ny\n", 'line 3: no step "exprot" in this recording'),
        ("## 24\nx\n", "line 1: no step 24 in this recording (its steps are 1-23"),
        ("## init\nx\n", '"init" is more than one step: producer · init (step 1), consumer · init'),
        ("## 8: consumer · map\nx\n", "step 8 of this recording is producer · export, not"),
        (
            "## 8\nx\n## producer export\ny\n",
            "line 3: step 8: producer · export already has a note",
        ),
        ("# title\nstray text\n## 8\nx\n", "line 2: text before the first step heading"),
        ("just text\n", "line 1: text before the first step heading"),
        ("", "has no notes"),
        ("##\nx\n", "line 1: an empty heading"),
        ("## 8\nred \x1b[31m\n", "line 2: a control character ('\\x1b')"),
        ("## 8\nabc \u202e cba\n", "line 2: a control character"),
    ],
)
def test_a_wrong_notes_file_says_why_in_one_line(timeline, text, says):
    with pytest.raises(NotesError) as exc:
        bind(*split(text), timeline)
    assert says in str(exc.value) and "\n" not in str(exc.value)


def test_a_step_the_recording_never_reached_is_refused():
    failed = Timeline(gallery.resolve("h100-scenario-out-of-memory").events)
    reached = max(f.steps for f in failed.frames)
    with pytest.raises(
        NotesError, match=f"never ran in this recording: it stopped after step {reached}"
    ):
        bind(*split("## consumer · verify\nx\n"), failed)


def test_files_that_are_not_notes(tmp_path, timeline):
    with pytest.raises(NotesError, match="no such notes file"):
        read(tmp_path / "missing.md", timeline)
    with pytest.raises(NotesError, match="is a directory"):
        read(tmp_path, timeline)
    (tmp_path / "latin1.md").write_bytes(b"## 8\ncaf\xe9\n")
    with pytest.raises(NotesError, match="line 2: not UTF-8"):
        read(tmp_path / "latin1.md", timeline)


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, TERM="dumb"),
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize(
    "content, says",
    [
        ("## 8\nx\n## exprot\ny\n", 'line 3: no step "exprot"'),
        (None, "no such notes file"),
    ],
)
def test_replay_with_bad_notes_exits_2_with_one_line(tmp_path, content, says):
    path = tmp_path / "notes.md"
    if content is not None:
        path.write_text(content)
    res = run("replay", "h100-vmm-1mib", "--notes", str(path))
    assert res.returncode == 2 and says in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""


def test_the_notes_module_never_imports_textual():
    code = "import sys, vmmtui.record.notes\nprint(sorted(m for m in sys.modules if m.startswith('textual')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_line_break_inside_a_paragraph_is_a_space_as_in_markdown(timeline):
    text = "## 8\nThe fd is\na handle.\n\n- one\n- two\n\n    code\n    kept\n"
    note = bind(*split(text), timeline).chapters()[0]
    assert note.text.startswith("The fd is\na handle.")  # as written (the transcript keeps it)
    assert note.shown == "The fd is a handle.\n\n- one\n- two\n\n    code\n    kept"


def test_the_example_notes_in_docs_fit_the_h100_and_memfd_recordings():
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    for name in ("h100-vmm-1mib", "h100-vmm-1gib", "cpu-memfd-1mib"):
        notes = read(root / "docs" / "lecture-notes.md", Timeline(gallery.resolve(name).events))
        assert len(notes) == 8 and notes.title.startswith("One GPU allocation")
