"""A recording whose every text field holds what a terminal, a page or a Markdown viewer acts on:
no output made from it holds any of it raw.

The recording is generated from the event registry (``Event.all_types``) and the header's type
hints: each event class gets one instance whose every string (in nested dataclasses, lists,
tuples and dicts, keys too) is hostile, so a field added later is covered without a change here.
Every way out is checked: the replay inspector (its screen), the page (``--html``: every frame as
the inspector draws it, and the event log), ``--transcript`` in Markdown and JSON lines,
``vmmtui run``'s console lines and a trace recording's ``--text``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import types
import typing
import unicodedata
from enum import Enum
from io import StringIO
from pathlib import Path
from typing import Any, Union

import pytest

from tests.commands import vmmtui
from tests.events_fixture import session_events
from vmmtui.record import read
from vmmtui.record.recording import MAGIC, Header
from vmmtui.stream.codec import encode
from vmmtui.stream.events import Event

#: a title change (OSC), a screen clear (CSI), the one-byte CSI (C1), a bell, a NUL, a carriage
#: return, a right-to-left override, a lone surrogate; and markup a renderer might interpret
HOSTILE = "x\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202eevil\x00\r\udfff[/]<b>*y*"
#: what no output may hold raw: control characters other than line breaks and tabs, C1, format
#: and bidi characters, lone surrogates
_RAW = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


#: fields that name a worker: the reader refuses names its session did not start (a test below),
#: so here they name one it did
WORKER_FIELDS = ("role", "consumer")


def hostile(tp: Any, depth: int = 0, workers: str = HOSTILE) -> Any:
    """A value of type ``tp`` whose every string is HOSTILE (numbers small, enums their first);
    ``workers``: what the fields that name a worker hold."""
    if tp is str or tp is Any:
        return HOSTILE
    if tp is bool:
        return False
    if tp is int:
        return 1
    if tp is float:
        return 1.0
    if tp is type(None):
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return hostile(next(a for a in args if a is not type(None)), depth, workers)
    if origin in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return tuple(hostile(a, depth, workers) for a in args)
        item = hostile(args[0] if args else str, depth, workers)
        return (item,) if origin is tuple else [item]
    if origin is dict:
        kt, vt = args or (str, Any)
        return {hostile(kt, depth, workers): hostile(vt, depth, workers)}
    if isinstance(tp, type) and issubclass(tp, Enum):
        return next(iter(tp))
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        return tp(
            **{
                f.name: workers
                if f.name in WORKER_FIELDS and hints[f.name] is str
                else hostile(hints[f.name], depth + 1, workers)
                for f in dataclasses.fields(tp)
            }
        )
    raise TypeError(f"no hostile value for {tp!r}")


def every_event(workers: str = HOSTILE) -> list[Event]:
    return [hostile(cls, workers=workers) for cls in Event.all_types().values() if cls is not Event]


def recording(path: Path, events: list[Event], **header: str) -> Path:
    data = {MAGIC: 2, **encode(hostile(Header)), **header, "format": 2, "events_version": 1}
    lines = [json.dumps(data), *(e.to_json() for e in events)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    return path


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    """A session's recording (its start hostile but for its plan and workers, then one hostile
    instance of every other event type, then a real session's steps and end) and a trace's (the
    hostile trace start first, then every trace event type)."""
    tmp = tmp_path_factory.mktemp("hostile")
    real = session_events()
    events = every_event(workers="consumer")
    starts = {type(e).__name__: e for e in events if type(e).__name__.endswith("Started")}
    start = dataclasses.replace(
        starts["SessionStarted"],
        plan=real[0].plan,  # type: ignore[attr-defined]
        consumers=real[0].consumers,  # type: ignore[attr-defined]
        devices=real[0].devices,  # type: ignore[attr-defined]
    )
    session = [e for e in events if type(e).__name__ not in ("SessionStarted", "TraceStarted")]
    trace = [e for e in session if type(e).__module__ == "vmmtui.stream.observed"]
    trace.sort(key=lambda e: type(e).__name__ == "TraceFinished")  # the end last
    return {
        "session": recording(tmp / "session.jsonl", [start, *session, *real[1:]]),
        "trace": recording(tmp / "trace.jsonl", [starts["TraceStarted"], *trace], backend="trace"),
    }


def assert_clean(text: str, where: str) -> None:
    raw = sorted({f"U+{ord(c):04X} {unicodedata.name(c, '?')}" for c in _RAW.findall(text)})
    assert not raw, f"{where} holds raw {raw}"
    # the title change and the clear are there, escaped: seen, not acted on
    for seq in ("]0;PWNED", "[2J"):
        for at in (m.start() for m in re.finditer(re.escape(seq), text)):
            assert text[max(0, at - 3) : at] == "x1b", f"{where}: {text[at - 40 : at + 20]!r}"


def test_every_event_type_has_a_hostile_instance_with_every_string_field_hostile():
    events = every_event()
    assert len(events) >= 30  # the session's and the trace's
    for e in events:
        strings = list(_strings(e))
        fields = [f for f in dataclasses.fields(e) if "str" in str(f.type)]
        assert all(s == HOSTILE for s in strings) and (strings or not fields), e


def _strings(value: Any):
    """Every string in a value: dataclass fields, list and tuple items, dict keys and values."""
    if isinstance(value, Enum):
        return
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _strings(getattr(value, f.name))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)


def test_read_back_every_string_is_escaped(recordings):
    for path in recordings.values():
        rec = read(path)
        for e in rec.events:
            for s in _strings(e):
                assert_clean(s, f"{type(e).__name__} of {path.name}")
        for s in _strings(rec.header):
            assert_clean(s, "the header")


@pytest.mark.parametrize("kind", ["session", "trace"])
@pytest.mark.parametrize("out", ["t.md", "t.jsonl"])
def test_the_transcripts_hold_none_of_it_raw(recordings, tmp_path, kind, out):
    res = vmmtui(
        "replay", str(recordings[kind]), "--transcript", out, cwd=tmp_path, errors="surrogateescape"
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert_clean(res.stdout + res.stderr, "replay's own lines")
    text = (tmp_path / out).read_text(encoding="utf-8")
    assert_clean(text, out)
    if out.endswith(".jsonl"):  # the values themselves: escaped where the recording was read
        for line in text.splitlines():
            assert "PWNED" not in line or "\\\\x1b]0;PWNED" in line, line


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["session", "trace"])
def test_the_page_holds_none_of_it_raw(recordings, tmp_path, kind):
    res = vmmtui(
        "replay", str(recordings[kind]), "--html", "p.html", cwd=tmp_path, errors="surrogateescape"
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert_clean(res.stdout + res.stderr, "replay's own lines")
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    assert_clean(page, "the page")
    assert "x1b]0;PWNED" in page
    assert "<b>*y*" not in page  # the markup is text: &lt;b&gt;


def test_a_trace_recordings_text_holds_none_of_it_raw(recordings, tmp_path):
    res = vmmtui(
        "replay", str(recordings["trace"]), "--text", cwd=tmp_path, errors="surrogateescape"
    )
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert_clean(res.stdout + res.stderr, "replay --text")
    assert "x1b]0;PWNED" in res.stdout


def test_the_console_holds_none_of_it_raw(recordings):
    from vmmtui.render.console import LogPrinter

    out = StringIO()
    printer = LogPrinter(out, verbose=True)
    for e in read(recordings["session"]).events:
        printer(e)
    out.write(printer.summary())
    assert_clean(out.getvalue(), "the console")
    assert "x1b]0;PWNED" in out.getvalue()


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["session", "trace"])
async def test_the_inspectors_screen_holds_none_of_it_raw(recordings, kind):
    from vmmtui.tui.replay import ReplayApp

    app = ReplayApp(read(recordings[kind]))
    async with app.run_test(size=(160, 48)) as pilot:
        shots = []
        for key in ("home", "end", "left"):
            await pilot.press(key)
            await pilot.pause()
            shots.append(app.export_screenshot())
    for shot in shots:
        assert_clean(shot, f"the {kind} replay's screen")
    assert any("PWNED" in shot for shot in shots)  # drawn, escaped


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["session", "trace"])
def test_the_bytes_the_replay_writes_to_a_real_terminal_hold_none_of_it(recordings, tmp_path, kind):
    """The inspector in a pseudo-terminal: every byte it wrote, not a screenshot's picture of it."""
    from tests.tui.terminal import Terminal

    term = Terminal(tmp_path, "replay", str(recordings[kind]), width=160, height=48)
    try:
        term.wait_for("REPLAY")
        for key in ("\x1b[F", "\x1b[H", "\x1b[D", "\x1b[C"):  # End, Home, ←, →
            term.press(key)
            time.sleep(0.5)
        term.wait_for("PWNED")
        term.press("q")
        assert term.ended_within(20) is not None
    finally:
        term.close()
    out = term.output.decode("utf-8", "surrogateescape")
    for raw in ("\x1b]0;PWNED", "\x07\x1b[2J", "\x9b31m", "\u202e", "\udfff"):
        assert raw not in out, f"{raw!r} reached the terminal"
    assert "x1b]0;PWNED" in term.text
