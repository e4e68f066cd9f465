"""The stream says where the plan stands: the running step (before it runs), the next step after
every step, and the scenario, so that a view folds events instead of asking the live Session."""

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import PRODUCER
from vmmtui.scenarios import SCENARIOS
from vmmtui.session import Session
from vmmtui.stream.events import NextStep, SessionStarted, StepDone, StepStarted
from vmmtui.system.fdtable import FdTable


def config(tmp, **kw) -> SessionConfig:
    return SessionConfig(backend="memfd", size=1 << 16, tmpdir=str(tmp), **kw)


def test_step_started_arrives_before_the_worker_runs_the_step(clean_state):
    """At StepStarted of the export, the kernel does not show the exported memfd yet; at its
    StepDone it does: the event is news while the step runs, not a record of it afterwards."""
    with Session(config(clean_state)) as s:
        s.start()
        while s.next_step != (PRODUCER, "export"):
            s.step()
        pid = s.workers[PRODUCER].pid
        seen = []
        for e in s.stepping():
            memfds = {n for n, t in FdTable.read(pid).entries.items() if "memfd:" in t.target}
            seen.append((type(e).__name__, memfds))
            if isinstance(e, StepDone):
                exported = e.report.state.exported_fd
        kinds = [k for k, _ in seen]
        assert kinds.index("StepStarted") < kinds.index("StepDone")
        assert exported not in seen[kinds.index("StepStarted")][1]
        assert exported in seen[kinds.index("StepDone")][1]
        assert kinds[-1] == "NextStep"


def test_next_step_follows_the_start_and_every_step(clean_state):
    with Session(config(clean_state)) as s:
        events = s.start()
        assert events[-1] == NextStep(0, *s.plan[0])
        started = next(e for e in events if isinstance(e, SessionStarted))
        assert started.scenario is None
        while not s.stopped:
            step = s.step()
            assert isinstance(step[0], StepStarted)
            assert step[-1] == NextStep(s.position, *(s.next_step or ("", "")))
        assert step[-1].stopped and step[-1].done == len(s.plan)


def test_a_session_closed_mid_plan_says_nothing_runs_next(clean_state):
    s = Session(config(clean_state))
    s.start()
    s.step()
    closing = s.close()
    assert NextStep(1) in closing and NextStep(1).stopped


def test_the_scenario_is_announced_with_its_promise(clean_state):
    name = "consumer-first"
    assert name in SCENARIOS
    s = Session(config(clean_state, scenario=name))
    try:
        started = next(e for e in s.start() if isinstance(e, SessionStarted))
    finally:
        s.close()
    sc = SCENARIOS[name]
    assert started.scenario is not None
    assert (started.scenario.name, started.scenario.explanation) == (name, sc.explanation)
    assert started.scenario.expect == list(sc.expect)
    assert started.plan == sc.plan()
