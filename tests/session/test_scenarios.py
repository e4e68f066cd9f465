"""Every failure scenario on memfd with real processes: the real error, then a clean state."""

import os
from dataclasses import replace

import pytest

from tests.session.runs import closed_clean, report, run_scenario
from vmmtui.backends.probe import DeviceRecord
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import CONSUMER, PRODUCER
from vmmtui.scenarios import ANY, SCENARIOS, VERIFIED
from vmmtui.session import Session, SessionError
from vmmtui.stream.events import (
    Notice,
    NoticeCode,
    ScenarioOutcome,
    SessionFailed,
    StepDone,
    WorkerExited,
)
from vmmtui.words.notices import text_of
from vmmtui.words.troubleshooting import said, worded


def test_every_scenario_is_listed_with_an_expectation():
    assert len(SCENARIOS) >= 10
    for s in SCENARIOS.values():
        assert s.summary and s.explanation
        assert ANY in s.expect or VERIFIED in s.expect or s.at is not None


@pytest.mark.parametrize("name", [n for n, s in SCENARIOS.items() if "memfd" in s.cannot])
def test_scenarios_memfd_cannot_show_say_why(clean_state, name):
    with pytest.raises(
        SessionError,
        match=f"cannot be shown on the memfd backend: {SCENARIOS[name].why_not('memfd')[:20]}",
    ):
        Session(SessionConfig(backend="memfd", tmpdir=str(clean_state), scenario=name)).start()


def test_consumer_first_is_refused_then_connects(clean_state):
    s, events = run_scenario(clean_state, "consumer-first")
    order = [
        (e.role, e.step)
        for e in events
        if hasattr(e, "step") and not isinstance(e, (StepDone, SessionFailed))
    ]
    assert order.index((CONSUMER, "connect")) < order.index((PRODUCER, "listen"))
    connect = report(events, CONSUMER, "connect")
    assert connect.ok and connect.state.connect_retries, "the consumer never saw a refusal"
    assert set(connect.state.connect_retries) <= {"ENOENT", "ECONNREFUSED"}
    assert s.verified and s.outcome.as_expected and closed_clean(events)


def test_stale_socket_is_detected_and_removed(clean_state):
    s, events = run_scenario(clean_state, "stale-socket")
    assert any(isinstance(e, Notice) and "is left behind" in e.text for e in events)
    listen = report(events, PRODUCER, "listen")
    assert "ECONNREFUSED" in listen.state.stale_socket and "removed" in listen.state.stale_socket
    assert s.verified and s.outcome.as_expected and closed_clean(events)


def test_wrong_release_on_memfd_kills_the_worker_and_the_session_survives(clean_state):
    s, events = run_scenario(clean_state, "wrong-release")
    assert s.failure.code == "WORKER_DIED" and s.failed_at == (CONSUMER, "cleanup")
    died = [e for e in events if isinstance(e, WorkerExited) and e.role == CONSUMER]
    assert died and died[0].signal in ("SIGSEGV", "SIGABRT", "SIGBUS")
    assert any("free(0x" in line for line in died[0].log_tail)
    assert s.outcome.as_expected and closed_clean(events)


def test_producer_dies_after_send_and_the_consumer_still_verifies(clean_state):
    s, events = run_scenario(clean_state, "producer-dies")
    exits = [e for e in events if isinstance(e, WorkerExited) and e.role == PRODUCER]
    assert exits[0].signal == "SIGKILL" and exits[0].expected
    assert report(events, CONSUMER, "verify").state.verification.passed
    assert report(events, CONSUMER, "cleanup").ok
    assert s.verified and s.outcome.as_expected and closed_clean(events)


def test_consumer_dies_and_the_producer_sees_the_socket_close(clean_state):
    s, events = run_scenario(clean_state, "consumer-dies")
    assert s.failure.code == "PEER_CLOSED" and s.failed_at == (PRODUCER, "wait_ack")
    assert s.outcome.as_expected and closed_clean(events)
    cleanup = [e.report for e in events if isinstance(e, StepDone) and e.report.step == "cleanup"]
    assert [r.role for r in cleanup] == [PRODUCER] and cleanup[0].ok


def test_consumer_hangs_and_the_ack_deadline_fires(clean_state):
    s, events = run_scenario(clean_state, "consumer-hangs")
    assert s.failure.code == "ETIMEDOUT" and s.failed_at == (PRODUCER, "wait_ack")
    assert "within 3 s" in s.failure.message
    assert s.outcome.as_expected and closed_clean(events)


def test_leaked_fd_is_flagged_from_proc(clean_state):
    s, events = run_scenario(clean_state, "leaked-fd")
    assert s.failure.code == "FD_LEAK"
    received = report(events, CONSUMER, "receive").state.received_fd
    # the leak travels as facts (the fd and its target), worded only where it is drawn
    assert s.failure.fds.get(received, "").startswith("/memfd:vmmtui-alloc"), s.failure
    assert s.failure.message == f"/proc/{s.workers[CONSUMER].pid}/fd"
    assert f"fd {received} → /memfd:vmmtui-alloc" in said(s.failure)
    # the receive's fd table, as facts: the fd that arrived and its target, worded where drawn
    [delta] = [e for e in events if isinstance(e, Notice) and e.code == NoticeCode.FD_DELTA]
    assert str(delta.facts[f"fd.{received}"]).startswith("/memfd:vmmtui-alloc") and not delta.text
    assert text_of(delta).endswith("arrived with SCM_RIGHTS") and f"fd {received} →" in text_of(
        delta
    )
    assert s.outcome.as_expected and closed_clean(events)


def test_intruder_is_refused_and_gets_no_fd(clean_state):
    s, events = run_scenario(clean_state, "intruder")
    accept = report(events, PRODUCER, "accept")
    refused = accept.state.refused
    assert len(refused) == 1 and refused[0].pid not in (
        s.workers[CONSUMER].pid,
        s.workers[PRODUCER].pid,
    )
    assert refused[0].uid == os.getuid()
    assert accept.state.peers[CONSUMER].pid == s.workers[CONSUMER].pid
    assert any(isinstance(e, Notice) and "received 0 fd(s)" in e.text for e in events)
    assert s.verified and s.outcome.as_expected and closed_clean(events)


def test_outcome_not_as_expected_is_reported(clean_state):
    # consumer-dies expects PEER_CLOSED at the producer's ACK; a crash elsewhere must not count as that
    s, events = run_scenario(clean_state, "consumer-dies", crash="producer:fill:exit")
    outcome = [e for e in events if isinstance(e, ScenarioOutcome)][0]
    assert outcome.outcome == "WORKER_DIED" and not outcome.as_expected
    assert closed_clean(events)


# -- fabric-without-imex: what the probe found decides whether it can be shown ------------------------
H100_PROBE = DeviceRecord(
    0,
    "NVIDIA H100 80GB HBM3",
    vmm=True,
    posix_fd=True,
    fabric=True,
    fabric_create="CUDA_ERROR_NOT_PERMITTED",
)


def test_fabric_without_imex_can_be_shown_only_where_the_probe_was_refused():
    from vmmtui.plan.config import validate

    s = SCENARIOS["fabric-without-imex"]
    assert s.flags_for(PRODUCER) == ["fabric-handle"] and s.at == (PRODUCER, "create")
    assert "CUDA_ERROR_NOT_PERMITTED" in s.expect
    assert s.why_not("cuda", H100_PROBE) is None
    assert "does not support fabric handles" in s.why_not("cuda", replace(H100_PROBE, fabric=False))
    assert "fabric handles work here" in s.why_not(
        "cuda", replace(H100_PROBE, fabric_create="CUDA_SUCCESS")
    )
    assert "memfd has no analogue" in s.why_not("memfd", H100_PROBE)
    problem = validate(
        SessionConfig(scenario=s.name),
        "cuda",
        1,
        80 << 30,
        s,
        replace(H100_PROBE, fabric_create="CUDA_SUCCESS"),
    )
    assert problem.startswith(
        "scenario fabric-without-imex cannot be shown on the cuda backend: fabric handles work"
    )
    assert validate(SessionConfig(scenario=s.name), "cuda", 1, 80 << 30, s, H100_PROBE) is None


def test_fabric_refusal_has_its_own_cause_and_fix():
    from vmmtui.stream.failures import failure

    f = failure("CUDA_ERROR_NOT_PERMITTED", "cuMemCreate (fabric)")
    assert (
        "IMEX channel" in worded(f)[0]
        and "/dev/nvidia-caps-imex-channels" in worded(f)[0]
        and "nvidia-imex" in worded(f)[1]
    )
    assert "GB200" in worded(f)[0] and "POSIX_FILE_DESCRIPTOR" in worded(f)[1]


def test_fabric_without_imex_on_memfd_exits_2_saying_why():
    from vmmtui.cli import main

    assert main(["run", "--backend", "memfd", "--scenario", "fabric-without-imex"]) == 2


@pytest.mark.gpu
def test_cuda_fabric_without_imex_is_refused_by_the_driver(clean_state):
    """On a box without IMEX (a lone H100) cuMemCreate refuses; elsewhere the start says why it cannot be shown."""
    from vmmtui.backends import choose

    probe = choose("cuda").device_probe
    why_not = SCENARIOS["fabric-without-imex"].why_not("cuda", probe)
    session = Session(
        SessionConfig(backend="cuda", tmpdir=str(clean_state), scenario="fabric-without-imex")
    )
    if why_not:
        with pytest.raises(SessionError, match="cannot be shown on the cuda backend"):
            session.start()
        pytest.skip(why_not)
    events = session.lifetime()
    print("\n" + session.failure.one_line())
    assert session.outcome.as_expected and session.failed_at == (PRODUCER, "create")
    assert (
        session.failure.call == "cuMemCreate (fabric)"
        and session.failure.code == probe.fabric_create
    )
    assert "IMEX" in worded(session.failure)[0] and closed_clean(events)
