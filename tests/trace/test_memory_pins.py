"""The pins of a memory file, on real processes traced with eBPF (tests/fixtures/memfd_pins.py):
a receiver that keeps a dup of each received memfd (PyTorch's ``rebuild_storage_fd``) holds the
memory to its exit and is said to, by the dup; the same loop letting each go is nothing to look
at; the pile is named as growth while the importer still runs; an exporter that closed its fd
and was killed leaves its importer holding the memory, said then and, once released, in the past.
Slow tier; skipped with the reason where eBPF is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.model.findings import Weight
from vmmtui.model.policy import weigh
from vmmtui.stream.events import Event
from vmmtui.stream.observed import LedgerFinding, ProcessExit
from vmmtui.words.findings import finding_words

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ebpf")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def trace(mode: str, rounds: int = 4, *extra: str) -> tuple[list[Event], str]:
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--no-cuda", *extra, "--",
         sys.executable, str(FIXTURES / "memfd_pins.py"), mode, str(rounds)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "FIXTURE_HOLD": "0.4", "FIXTURE_GAP": "0.2", "NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()], res.stderr


def found(events: list[Event], kind: str | None = None) -> list[LedgerFinding]:
    return [e for e in events if isinstance(e, LedgerFinding) and (kind is None or e.kind == kind)]


def problems(events: list[Event]) -> list[str]:
    return [f"{f.kind}: {finding_words(f).what}" for f in found(events)
            if weigh(f) is Weight.PROBLEM]  # fmt: skip


def test_a_receiver_keeping_dups_of_received_memfds_holds_them_to_exit_by_its_dups():
    events, _ = trace("dups", 4)
    held = found(events, "held-at-exit")
    assert len(held) == 4, problems(events)
    importer = held[0].pid
    assert {f.pid for f in held} == {importer} and all(f.how == "dup" for f in held)
    assert all(f.fds and f.fd == f.fds[0] for f in held)
    words = finding_words(held[0])
    assert "held until exit by fd" in words.what and "dup" in words.detail
    [end] = [e for e in events if isinstance(e, ProcessExit) and e.pid == importer]
    assert all(f.ktime == end.ktime for f in held)


def relations(events: list[Event], kind: str) -> set[tuple[int, int]]:
    """The (holder, exporter) pairs of ``kind``: one problem each, however often updated."""
    return {(f.pid, f.peer) for f in found(events, kind)}


def test_the_pile_of_kept_dups_is_named_as_growth_at_the_fourth_round_before_the_exit():
    events, _ = trace("dups", 5)
    grown, *updates = found(events, "growth")
    assert relations(events, "growth") == {(grown.pid, grown.peer)}  # one problem, updated
    assert [f.opens[-1] for f in updates] == [5]  # said again as it grew by a quarter
    assert grown.opens == [0, 1, 2, 3, 4]  # pins at each round's start, then now
    i = events.index(grown)
    [end] = [k for k, e in enumerate(events) if isinstance(e, ProcessExit) and e.pid == grown.pid]
    assert i < end  # said live, while the importer ran
    received = [e for e in events if type(e).__name__ == "FdsReceived" and e.pid == grown.pid]
    assert grown.ktime == received[3].ktime  # the fourth memfd's arrival
    assert "grow" in finding_words(grown).what


def test_loops_that_let_each_memfd_go_are_nothing_to_look_at():
    for mode in ("dups-drop", "maps-drop"):
        events, _ = trace(mode, 4)
        assert problems(events) == [], mode
        assert len(found(events, "shared")) == 4


def test_an_exporter_that_closed_its_fd_and_was_killed_leaves_its_importer_holding_it():
    events, _ = trace("killed", 1)
    [held] = found(events, "held-after-exporter-died")
    assert held.memory == "file" and held.name == "memfd:bucket-0"
    assert "SIGKILL" in finding_words(held).detail and "still holds" in finding_words(held).what


def test_held_after_the_exporter_died_is_said_in_the_past_once_released():
    events, _ = trace("killed-release", 1)
    [held] = found(events, "held-after-exporter-died")
    [over] = found(events, "released-after-exporter-died")
    # both from the exporter's end: the hold said once it outlasted the window, its end after
    assert over.pid == held.pid and over.since == held.since and over.via == "close"
    assert held.since < held.ktime < over.ktime
    exits = [e for e in events if isinstance(e, ProcessExit) and e.pid == held.pid]
    assert exits and over.ktime < exits[0].ktime  # said when it let go, not at its exit
    words = finding_words(over)
    assert words.what.startswith(f"held pid {held.peer}'s memory ") and "killed" in words.what
    assert "released by close" in words.what
    assert weigh(over) is Weight.QUIET and problems(events) == [
        f"held-after-exporter-died: {finding_words(held).what}"
    ]


def test_a_receiver_keeping_only_mappings_holds_the_memory_to_exit_by_them():
    """mmap(2): "closing the file descriptor does not unmap the region": the fd closed, each
    mapping still pins its memfd; the exit names the mapping."""
    events, _ = trace("maps", 4)
    held = found(events, "held-at-exit")
    assert len(held) == 4, problems(events)
    assert all(f.how == "mapping" and f.fds == [] and f.ptr and f.opens == [f.ptr] for f in held)
    maps = {e.addr for e in events if type(e).__name__ == "MemoryMapped"}
    assert {f.ptr for f in held} <= maps
    assert "a mapping at" in finding_words(held[0]).what
    assert len(relations(events, "growth")) == 1


def test_an_importer_that_only_maps_after_its_exporter_was_killed_then_unmaps():
    events, _ = trace("killed-maps", 1)
    [held] = found(events, "held-after-exporter-died")
    assert held.fd == -1 and held.ptr and "still maps" in finding_words(held).what
    events, _ = trace("killed-maps-release", 1)
    [held] = found(events, "held-after-exporter-died")
    [over] = found(events, "released-after-exporter-died")
    assert over.via == "munmap" and "released by munmap" in finding_words(over).what
