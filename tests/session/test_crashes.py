"""A worker that dies at any step (SIGKILL, segfault, bad exit, exception): shown, and nothing is left."""

import pytest

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.session import Session
from vmmtui.stream.events import SessionClosed, SessionFailed, WorkerExited

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

PLAN = build_plan()

SIGNALS = {"kill": "SIGKILL", "segv": "SIGSEGV"}


def crash_run(tmp, role: str, step: str, how: str):
    s = Session(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp), crash=f"{role}:{step}:{how}")
    )
    return s, s.lifetime()


@pytest.mark.parametrize("role,step", PLAN, ids=[f"{r}-{s}" for r, s in PLAN])
def test_sigkill_at_every_step(clean_state, role, step):
    s, events = crash_run(clean_state, role, step, "kill")
    failed = [e for e in events if isinstance(e, SessionFailed)]
    assert failed and (failed[0].role, failed[0].step) == (role, step)
    assert failed[0].failure.code == "WORKER_DIED" and "SIGKILL" in failed[0].failure.message
    exited = [e for e in events if isinstance(e, WorkerExited) and e.role == role]
    assert exited and exited[0].signal == "SIGKILL" and not exited[0].expected
    closed = [e for e in events if isinstance(e, SessionClosed)][-1]
    assert closed.clean, closed.leftovers


@pytest.mark.parametrize("how", ["segv", "exit", "raise"])
@pytest.mark.parametrize(
    "role,step", [("producer", "map"), ("consumer", "import"), ("consumer", "verify")]
)
def test_other_deaths(clean_state, role, step, how):
    s, events = crash_run(clean_state, role, step, how)
    failed = [e for e in events if isinstance(e, SessionFailed)][0]
    assert (failed.role, failed.step) == (role, step)
    if how == "raise":  # an exception is caught and reported by the worker, which lives on
        assert failed.failure.code == "PYTHON" and "injected crash" in failed.failure.message
    else:
        exited = [e for e in events if isinstance(e, WorkerExited) and e.role == role][0]
        assert (exited.signal or exited.returncode) == ({"segv": "SIGSEGV", "exit": 3}[how])
    assert [e for e in events if isinstance(e, SessionClosed)][-1].clean


def test_noise_on_stdout_and_stderr_changes_nothing(clean_state):
    s, events = crash_run(clean_state, "consumer", "verify", "noise")
    assert s.verified and s.failure is None
    assert [e for e in events if isinstance(e, SessionClosed)][-1].clean


def test_malformed_control_message_is_a_protocol_failure(clean_state):
    s, events = crash_run(clean_state, "producer", "create", "babble")
    failed = [e for e in events if isinstance(e, SessionFailed)][0]
    assert failed.failure.code == "PROTOCOL" and "not JSON" in failed.failure.message
    assert (failed.role, failed.step) == ("producer", "create")
    assert [e for e in events if isinstance(e, SessionClosed)][-1].clean
