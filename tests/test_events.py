"""The event stream round-trips through JSON: every event a real memfd run produces, failures and
every scenario included, comes back from its JSON line as an equal event."""

import json

import pytest

from vmmtui.config import SessionConfig
from vmmtui.events import VERSION, AttachEvent, Event, EventFormatError, Notice, StepDone
from vmmtui.scenarios import SCENARIOS
from vmmtui.session import Session

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
    }  # attach's: tests/attach
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
        ('{"v": 1, "event": "Notice"}', "lacks 'text'"),
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
    assert json.loads(Notice("x").to_json()) == {"v": VERSION, "event": "Notice", "text": "x"}
