"""A scenario defined only in this file runs end to end on memfd: no change to the package needed."""

import signal

from vmmtui.cli import main
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import CONSUMER, PRODUCER
from vmmtui.scenarios import SCENARIOS, Hook, Scenario, StopAfter, register
from vmmtui.scenarios.actions import Kill
from vmmtui.session import Session
from vmmtui.stream.events import Notice, ScenarioOutcome, SessionClosed


class CountFds:
    """A hook of this test's own: it reads the consumer's fd table through the stage's worker."""

    def run(self, stage):
        w = stage.workers[CONSUMER]
        return [Notice(f"test hook: consumer pid {w.pid} holds {len(w.held)} declared fds")]


KILLED_AFTER_IMPORT = Scenario(
    "test-consumer-killed-after-import",
    "the consumer dies right after importing",
    "Defined in a test: the consumer is SIGKILLed after import; the producer's ACK wait sees EOF.",
    expect=("PEER_CLOSED",),
    at=(PRODUCER, "wait_ack"),
    edits=(StopAfter((CONSUMER, "import"), keep=PRODUCER),),
    hooks=(
        Hook("after", CONSUMER, "receive", CountFds()),
        Hook("after", CONSUMER, "import", Kill(CONSUMER, signal.SIGKILL, "after import")),
    ),
)


def test_a_scenario_object_runs_end_to_end(clean_state):
    s = Session(
        SessionConfig(backend="memfd", size=1 << 16, tmpdir=str(clean_state)),
        scenario=KILLED_AFTER_IMPORT,
    )
    events = s.lifetime()
    assert any(
        isinstance(e, Notice) and e.text.startswith("test hook: consumer pid") for e in events
    )
    outcome = next(e for e in events if isinstance(e, ScenarioOutcome))
    assert (
        outcome.outcome == "PEER_CLOSED"
        and outcome.at == "producer wait_ack"
        and outcome.as_expected
    )
    assert [e for e in events if isinstance(e, SessionClosed)][-1].clean


def test_a_registered_scenario_runs_through_the_cli(clean_state, monkeypatch):
    leaky = Scenario(
        "test-leaky-consumer",
        "the consumer keeps the fd",
        "Defined in a test.",
        expect=("FD_LEAK",),
        at=(CONSUMER, "cleanup"),
        flags={CONSUMER: ("keep-received-fd",)},
    )
    monkeypatch.setitem(SCENARIOS, leaky.name, leaky)
    register(leaky)
    monkeypatch.setenv("TMPDIR", str(clean_state))
    assert main(["run", "--backend", "memfd", "--size", "64KiB", "--scenario", leaky.name]) == 0
