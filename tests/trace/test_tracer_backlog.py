"""The ring buffer's reader moves records out only while the consumer keeps up: past RAW_MOST
records waiting, it leaves the rest to the kernel's ring buffer (which counts what it cannot
hold), so a consumer slower than the calls (``--text`` at 10,000 calls a second) does not grow
the tracer's memory without end."""

import time

from vmmtui.trace import tracer as module


class EndlessRing:
    """A probe whose ring always has 1,000 more records (the calls never stop)."""

    def __init__(self) -> None:
        self.polls = 0

    def poll(self, timeout_ms: int) -> list[bytes]:
        self.polls += 1
        return [b"r"] * 1000


def test_the_reader_waits_while_the_consumer_is_behind_and_goes_on_when_it_catches_up(
    monkeypatch,
):
    monkeypatch.setattr(module, "RAW_MOST", 5000)
    t = module.Tracer(["true"], cuda=False, nvml=False)
    t.probe = EndlessRing()  # type: ignore[assignment]
    t._start_reader()
    try:
        time.sleep(0.3)  # nothing is decoded meanwhile
        assert 5000 <= t._queued < 6000, t._queued
        polls = t.probe.polls
        time.sleep(0.1)
        assert t.probe.polls == polls  # waiting: the ring keeps the rest
        while not t.raw.empty():  # the consumer takes what waited (as ``_drain`` takes it)
            t._got(t.raw.get_nowait())
        time.sleep(0.1)
        assert t.probe.polls > polls and t._queued <= 6000
    finally:
        t._stop_reader()
