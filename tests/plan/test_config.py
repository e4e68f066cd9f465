"""config.validate: the one answer to "can this run here?" for the CLI, the app and the session."""

import pytest

from vmmtui.plan.config import SessionConfig, WorkerConfig, validate
from vmmtui.scenarios import get


@pytest.mark.parametrize(
    "kw,backend,extra,says",
    [
        ({"verify": "device"}, "memfd", {}, "--verify device needs a GPU"),
        ({"verify": "sideways"}, "cuda", {}, "unknown --verify"),
        ({"mechanism": "legacy"}, "memfd", {}, "memfd has no legacy mode"),
        ({"consumers": 9}, "cuda", {}, "choose 1 to 8"),
        ({"device": -1}, "cuda", {}, "device -1 does not exist"),
        ({"device": 1}, "memfd", {}, "needs the cuda backend"),
        (
            {"devices": [0, 3]},
            "cuda",
            {"device_count": 2},
            "device 3 does not exist (the driver sees 2)",
        ),
        ({"size": 10 << 30}, "cuda", {"capacity": 8 << 30}, "larger than device 0's memory"),
        ({"size": 10 << 30}, "memfd", {"capacity": 8 << 30}, "larger than the RAM available"),
        ({"scenario": "unaligned-size"}, "memfd", {}, "cannot be shown on the memfd backend"),
        (
            {"scenario": "leaked-fd", "consumers": 2},
            "memfd",
            {},
            "one consumer and the producer writing",
        ),
    ],
)
def test_what_cannot_run_says_why_in_one_line(kw, backend, extra, says):
    config = SessionConfig(**kw)
    problem = validate(config, backend, scenario=get(config.scenario), **extra)
    assert problem is not None and says in problem and "\n" not in problem


def test_what_can_run_passes():
    assert validate(SessionConfig(), "memfd") is None
    assert (
        validate(SessionConfig(consumers=4, devices=[0, 1], size=1 << 30), "cuda", 2, 80 << 30)
        is None
    )
    legacy = get("legacy-second-context")
    assert validate(SessionConfig(scenario=legacy.name), "cuda", scenario=legacy) is None


def test_worker_config_round_trips_through_argv():
    cfg = WorkerConfig(
        "consumer-2",
        "memfd",
        4096,
        "/tmp/x/vmmtui.sock",
        1,
        2.0,
        3.0,
        4.0,
        "both",
        "legacy",
        3,
        "consumer-writes",
        ["keep-received-fd"],
        "verify:kill",
        7,
    )
    assert WorkerConfig.from_argv(cfg.to_argv()) == cfg
