"""A teacher's notes on a recording: one Markdown file, a ``## heading`` per step.

The format (``vmmtui replay FILE --notes NOTES.md``)::

    # Lecture 4: sharing GPU memory between processes      <- optional title (the first line)

    ## start                 <- shown before the first step
    Two processes, one GPU allocation.

    ## 8                     <- after step 8 ran (the frame "as of step 8")
    The fd is a handle to the allocation, not the memory itself.

    ## consumer · receive    <- a step by name: "role · step", "role step" or "role/step"
    ## verify                <- or the step alone, when only one role has it
    ## end                   <- the last frame

A heading names exactly one step of the recording (its number, ``step N``, the label the replay
shows, ``step 8: producer · export``, or its name), ``start`` or ``end``. Everything under it up to
the next ``##`` heading is that step's note; ``###`` and deeper headings, and ``##`` inside fenced
code blocks, are part of the note. Text before the first ``##`` heading other than the title is an
error (it would be shown nowhere), as are a heading that names no step, an ambiguous name, a step
the recording never reached, two headings for the same step and control characters. Each error is
one line naming the file and line. No Textual here.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from vmmtui.record.timeline import Timeline
from vmmtui.stream.names import defanged

#: the largest notes file read (a lecture's notes are a few KiB)
MAX_BYTES = 1 << 20
_SEPARATORS = re.compile(r"\s*(?:·|/|\s)\s*")
_NUMBER = re.compile(r"^(?:step\s*)?(\d+)(?:\s*[:.]\s*(.*))?$", re.IGNORECASE)
_FENCE = re.compile(r"^\s*(```|~~~)")


class NotesError(ValueError):
    """The notes cannot be used; the message is one line naming the file and line."""


@dataclass
class Section:
    """One ``## heading`` and the text under it, as written."""

    heading: str
    line: int
    text: str


@dataclass
class Note:
    """A section bound to the recording: shown with frame ``frame`` of its timeline."""

    frame: int
    #: what the note is on: "step 8: producer · export", "start", "end"
    label: str
    text: str
    line: int

    @property
    def shown(self) -> str:
        """The text as Markdown reads it: a line break inside a paragraph is a space (lists, quotes,
        indented and fenced lines keep theirs); for the teaching panel and the page."""
        return reflowed(self.text)


def reflowed(text: str) -> str:
    out: list[str] = []
    joinable = False
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append(line)
            joinable = False
            continue
        own = fenced or not line.strip() or re.match(r"^(\s{4}|\s*([-*+>]|\d+[.)])\s|#)", line)
        if joinable and not own:
            out[-1] = f"{out[-1]} {line.strip()}"
        else:
            out.append(line)
        joinable = bool(line.strip()) and not fenced and not re.match(r"^(\s{4}|#)", line)
    return "\n".join(out)


@dataclass
class Notes:
    title: str
    #: by frame index
    by_frame: dict[int, Note]
    path: str = ""

    def at(self, frame: int) -> Note | None:
        return self.by_frame.get(frame)

    def __len__(self) -> int:
        return len(self.by_frame)

    def chapters(self) -> list[Note]:
        """The notes in the order of their frames."""
        return [self.by_frame[k] for k in sorted(self.by_frame)]


def split(text: str, name: str = "NOTES.md") -> tuple[str, list[Section]]:
    """The title and the ``##`` sections of a notes file; NotesError on text that goes nowhere."""
    title = ""
    sections: list[Section] = []
    body: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        bad = next((ch for ch in line if _control(ch)), None)
        if bad is not None:
            raise NotesError(
                f"{name} line {number}: a control character ({bad!r}); notes are plain text"
            )
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else re.match(r"^##(?!#)\s*(.*?)\s*#*\s*$", line)
        if heading is not None:
            _close(sections, body, name)
            if not heading.group(1):
                raise NotesError(f"{name} line {number}: an empty heading; name a step after ##")
            sections.append(Section(heading.group(1), number, ""))
            body = []
        elif not sections and not title and not _trimmed(body) and re.match(r"^#\s+\S", line):
            title = line.lstrip("#").strip()
        else:
            body.append((number, line))
    _close(sections, body, name)
    if not sections:
        raise NotesError(
            f"{name} has no notes: write a heading per step (## 8, ## producer · export, "
            "## start, ## end) with the note under it"
        )
    return title, sections


def _close(sections: list[Section], body: list[tuple[int, str]], name: str) -> None:
    """The text read since the last heading goes to its section; before any, it must be blank."""
    if sections:
        sections[-1].text = _trimmed(body)
    elif _trimmed(body):
        first = next(number for number, line in body if line.strip())
        raise NotesError(
            f"{name} line {first}: text before the first step heading would be shown nowhere; "
            "put it under ## start"
        )


def bind(title: str, sections: list[Section], timeline: Timeline, name: str = "NOTES.md") -> Notes:
    """Each section on the frame its heading names; NotesError (one line) when one names none."""
    by_frame: dict[int, Note] = {}
    lines: dict[int, int] = {}
    for s in sections:
        frame, label = _frame_of(s, timeline, name)
        if frame in by_frame:
            raise NotesError(
                f"{name} line {s.line}: {label} already has a note (line {lines[frame]}); "
                "write one section per step"
            )
        by_frame[frame] = Note(frame, label, s.text, s.line)
        lines[frame] = s.line
    return Notes(title, by_frame, name)


def read(path: str | Path, timeline: Timeline) -> Notes:
    """The notes in ``path`` bound to ``timeline``; NotesError with one line when they cannot be."""
    path = Path(path)
    name = str(path)
    try:
        mode = os.stat(path).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # a FIFO would wait for a writer
            raise NotesError(
                f"{name} is not a regular file (a FIFO, a device or a socket): save the notes "
                "to a file and give that"
            )
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise NotesError(f"{name}: no such notes file") from None
    except IsADirectoryError:
        raise NotesError(f"{name} is a directory, not a notes file") from None
    except OSError as exc:
        raise NotesError(f"{name}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise NotesError(f"{name} is larger than {MAX_BYTES >> 20} MiB: not a notes file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise NotesError(f"{name} line {line}: not UTF-8 text; save the notes as UTF-8") from None
    # the notes are shown in the teaching panel, the page and the transcript: nothing in them
    # that a terminal acts on stays raw (lines and tabs do)
    text = defanged(text.replace("\r\n", "\n"))
    return bind(*split(text, name), timeline, name)


# -- naming steps -------------------------------------------------------------------------------------
def _canonical(name: str) -> str:
    return _SEPARATORS.sub(" · ", name.strip().lower())


def _frame_of(s: Section, timeline: Timeline, name: str) -> tuple[int, str]:
    plan = timeline.plan
    heading = s.heading.strip()
    where = f"{name} line {s.line}"
    key = _canonical(heading)
    if key == "start":
        return 0, "start"
    if key == "end":
        return len(timeline.frames) - 1, "end"
    named = [f"{r} · {st}" for r, st in plan]
    number = _NUMBER.match(heading)
    if number is not None:
        n = int(number.group(1))
        if not 1 <= n <= len(plan):
            raise NotesError(
                f"{where}: no step {n} in this recording (its steps are 1-{len(plan)}, "
                "or start and end)"
            )
        rest = number.group(2)
        if rest and _canonical(rest) != named[n - 1]:
            raise NotesError(
                f"{where}: step {n} of this recording is {named[n - 1]}, not {rest.strip()}"
            )
    else:
        exact = [k for k, full in enumerate(named) if full == key]
        alone = [k for k, (_, st) in enumerate(plan) if st.lower() == key]
        found = exact or alone
        if not found:
            examples = ", ".join(dict.fromkeys(named[k] for k in (7, 13, 0) if k < len(named)))
            raise NotesError(
                f'{where}: no step "{heading}" in this recording; name one by number '
                f"(1-{len(plan)}), by name ({examples}, …), or start or end"
            )
        if len(found) > 1:
            which = ", ".join(f"{named[k]} (step {k + 1})" for k in found)
            raise NotesError(f'{where}: "{heading}" is more than one step: {which}; say which')
        n = found[0] + 1
    frames = timeline.frames
    reached = max((f.steps for f in frames), default=0)
    if n > reached:
        raise NotesError(
            f"{where}: step {n} ({named[n - 1]}) never ran in this recording: "
            f"it stopped after step {reached}"
        )
    return timeline.frame_of_step(n), f"step {n}: {named[n - 1]}"


#: bidi overrides and isolates: they would reverse the text around a note
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _control(ch: str) -> bool:
    return (ch != "\t" and unicodedata.category(ch) == "Cc") or ch in _BIDI


def _trimmed(lines: list[tuple[int, str]]) -> str:
    return "\n".join(line for _, line in lines).strip("\n").rstrip()
