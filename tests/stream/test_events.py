"""The event stream round-trips through JSON: every event a real memfd run produces, failures and
every scenario included, comes back from its JSON line as an equal event."""

import dataclasses
import enum
import json
import subprocess
import sys
import types
import typing
from dataclasses import fields
from typing import Any

import pytest

from vmmtui.plan.config import SessionConfig
from vmmtui.scenarios import SCENARIOS
from vmmtui.session import Session
from vmmtui.stream.events import (
    VERSION,
    AttachEvent,
    Event,
    EventFormatError,
    GpuMemory,
    Notice,
    StepDone,
)

SHAPES = [
    {},
    {"consumers": 3, "direction": "consumer-writes"},
    {"crash": "consumer:verify:kill"},
    {"crash": "producer:map:raise"},
    *({"scenario": name} for name, s in SCENARIOS.items() if not s.why_not("memfd")),
]


def real_events(tmp, **kw) -> list[Event]:
    return Session(SessionConfig(backend="memfd", size=1 << 16, tmpdir=str(tmp), **kw)).lifetime()


@pytest.fixture(scope="module")
def streams(tmp_path_factory) -> dict[str, list[Event]]:
    return {json.dumps(kw): real_events(tmp_path_factory.mktemp("rt"), **kw) for kw in SHAPES}


@pytest.mark.slow
def test_every_event_of_real_runs_round_trips(streams):
    seen: set[str] = set()
    for shape, events in streams.items():
        for e in events:
            line = e.to_json()
            assert "\n" not in line
            back = Event.from_json(line)
            assert back == e, (shape, type(e).__name__)
            assert back.to_json() == line
            seen.add(type(e).__name__)
    session_types = {
        n for n, c in Event.types.items() if not issubclass(c, AttachEvent)
    }  # attach's: tests/trace/procfs
    assert seen == session_types, f"never produced by a real run: {session_types - seen}"


def test_step_reports_come_back_typed(streams):
    done = [Event.from_json(e.to_json()) for e in streams["{}"] if isinstance(e, StepDone)]
    verify = next(d for d in done if d.step == "verify")
    assert verify.report.state.verification.passed and verify.report.state.mapping.size == 1 << 16
    send = next(d for d in done if d.step == "send")
    assert send.report.state.sent.alloc_size == 1 << 16


@pytest.mark.parametrize(
    "line,says",
    [
        ('{"v": 1, "event": "Nope"}', "unknown event type"),
        ('{"v": 99, "event": "Notice", "text": "x"}', "version 99"),
        ('{"v": 1, "event": "SessionClosed"}', "lacks 'clean'"),
        ('{"v": 1, "event": "Notice", "text": 3}', "expected str"),
        (
            '{"v": 1, "event": "StepDone", "index": 0, "report": {"role": "producer"}, "roundtrip_ns": 1, "overhead_ns": 0}',
            "lacks",
        ),
        ("[1, 2]", "expected an object"),
        ("{not json", "not JSON"),
    ],
)
def test_lines_that_are_not_events_say_why(line, says):
    with pytest.raises(EventFormatError, match=says):
        Event.from_json(line)


def test_every_line_carries_the_format_version():
    assert json.loads(Notice("x").to_json()) == {
        "v": VERSION,
        "event": "Notice",
        "text": "x",
        "failure": None,
        "code": "",
        "facts": {},
    }


# -- every event type, built from the registry with every field filled ------------------------------
def sample(tp: Any, where: str) -> Any:
    """A non-empty value of type ``tp`` (nested dataclasses filled too); a type this cannot build
    fails the test, so a new field or event type of a new shape needs a line here."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)), where)
    if origin is list:
        return [sample(args[0], where)]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return (sample(args[0], where),)
        return tuple(sample(a, where) for a in args)
    if origin is dict:
        return {sample(args[0], where): sample(args[1], where)}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        values = {f.name: sample(hints[f.name], f"{where}.{f.name}") for f in fields(tp)}
        for f in fields(
            tp
        ):  # a flag whose default is True is sampled False, so it is not the default
            if isinstance(f.default, bool) and values[f.name] == f.default:
                values[f.name] = not f.default
        return tp(**values)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return list(tp)[-1]
    if tp is bool:
        return True
    if tp is int:
        return 7
    if tp is float:
        return 2.5
    if tp is str or tp is Any:
        return f"{where} \x1b é"
    raise TypeError(f"{where}: no sample for {tp!r}; teach sample() this type")


def empty(value: Any) -> bool:
    """None, 0, "" or an empty container (a bool is data either way)."""
    if isinstance(value, bool):
        return False
    return value is None or value == 0 or (hasattr(value, "__len__") and not len(value))


@pytest.mark.parametrize("name", sorted(Event.all_types()))
def test_every_event_type_round_trips_with_every_field_filled(name):
    cls = Event.types[name]
    assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, (
        f"{name} is not frozen"
    )
    e = sample(cls, name)
    for f in fields(cls):
        value = getattr(e, f.name)
        assert not empty(value), f"{name}.{f.name} sampled empty"
        if f.default is not dataclasses.MISSING:
            assert value != f.default, f"{name}.{f.name} sampled as its default"
        if f.default_factory is not dataclasses.MISSING:
            assert value != f.default_factory(), f"{name}.{f.name} sampled as its default"
    line = e.to_json()
    back = Event.from_json(line)
    assert back == e
    assert back.to_json() == line


def test_an_event_cannot_be_changed_after_it_is_made():
    e = Notice("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.text = "y"  # type: ignore[misc]


def test_int_keyed_dicts_come_back_with_int_keys():
    e = GpuMemory(pid=3, used={0: 1 << 20, 7: 5}, at=1.0)
    back = Event.from_json(e.to_json())
    assert back == e and list(back.used) == [0, 7]


@pytest.mark.parametrize("key", ["x", "1.5", "", "٣", "9" * 5000, " 1"])
def test_a_dict_key_that_is_not_an_integer_says_so(key):
    line = json.dumps({"v": VERSION, "event": "GpuMemory", "pid": 1, "used": {key: 1}})
    with pytest.raises(EventFormatError, match="is not an integer"):
        Event.from_json(line)


def test_a_recordings_event_of_another_module_reads_back_without_importing_it():
    """trace's events live in vmmtui/stream/observed.py; a reader that never imported it still reads them."""
    code = (
        "import sys; from vmmtui.stream.events import Event; "
        "assert 'vmmtui.stream.observed' not in sys.modules; "
        "e = Event.from_json(sys.argv[1]); print(type(e).__module__)"
    )
    line = json.dumps({"v": VERSION, "event": "TraceStarted", "mode": "polling", "targets": [1]})
    out = subprocess.run(
        [sys.executable, "-c", code, line], capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "vmmtui.stream.observed", out.stderr


def test_two_modules_cannot_register_one_event_name():
    with pytest.raises(TypeError, match="already"):
        type("Notice", (Event,), {"__module__": "somewhere.else"})
