"""The one world of a run (``model.world``): a clone folds on apart, the world at event N from
its keyframes is the world that folded N events, and a replayed trace recording is folded once,
whatever the replay makes of it (the inspector, the text, Perfetto's file, a page's count)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vmmtui.cli import main
from vmmtui.model.ledger import Ledger
from vmmtui.model.world import Keyframes, World
from vmmtui.pipeline.replay import read, resolve
from vmmtui.pipeline.session import MADE_BY_THE_LEDGER, TraceSession
from vmmtui.record.gallery import find
from vmmtui.stream.observed import TraceFinished

ROOT = Path(__file__).resolve().parents[2]
TORCH = find("h100-trace-torch-kill-exporter")
#: a trace with shares of both kinds (an fd sent, an allocation imported)
RUN = find("h100-trace-vmmtui-run")
SHARES = ROOT / "tests/data/traces/shares_1000.jsonl.gz"


def _folded(path: Path) -> list:
    """The events a world folds of a recording (what the pipeline would make is left out)."""
    return [
        e for e in read(path, found_again=False).events if not isinstance(e, MADE_BY_THE_LEDGER)
    ]


def _seen(w: World) -> dict:
    """What a world says, as data to compare: processes, fds of interest, holders, memory, pins,
    findings and their counts, transfers, the refcount book's pinned bytes."""
    g = w.ledger
    return {
        "procs": {p: (r.alive, r.comm, r.code) for p, r in g.procs.items()},
        "fds": {p: sorted(g.fds_of(p)) for p in g.procs},
        "holdings": sorted(
            (k, h.file, h.how, h.source_pid, h.source_fd) for k, h in g.holdings.items()
        ),
        "allocations": {
            k: (a.released_at, len(a.imports), len(g.pins(a))) for k, a in g.allocations.items()
        },
        "findings": [(f.kind, f.pid, f.peer, f.ktime) for f in g.findings],
        "by": dict(g.findings.by),
        "transfers": dict(g.transfers.by),
        "in_flight": len(g.in_flight),
        "pinned": dict(w.refs.book.pinned),
        "folded": w.folded,
    }


@pytest.mark.parametrize("path", [TORCH, SHARES], ids=lambda p: p.name)
def test_the_world_at_event_n_is_the_world_that_folded_n_events(path: Path):
    events = _folded(path)
    frames, world = Keyframes(every=97), World()
    for e in events:
        world.fold(e)
        frames.folded(e, world)
    assert len(frames.keyframes()) == 1 + len(events) // 97
    for n in sorted({0, 1, 96, 97, 98, len(events) // 3, len(events) - 1, len(events)}):
        fresh = World()
        for e in events[:n]:
            fresh.fold(e)
        assert _seen(frames.at(n)) == _seen(fresh), n
    assert _seen(frames.at(len(events))) == _seen(world)


def test_a_clone_folds_on_apart_and_shares_only_what_is_over():
    events = _folded(TORCH)
    half = len(events) // 2
    world = World()
    for e in events[:half]:
        world.fold(e)
    before = _seen(world)
    clone = world.clone()
    for e in events[half:]:
        clone.fold(e)
    assert _seen(world) == before != _seen(clone)
    assert clone.ledger.holdings is not world.ledger.holdings
    assert clone.ledger.findings is not world.ledger.findings
    assert clone.refs.ledger is clone.ledger  # the book reads its own world's ledger
    assert list(clone.ledger.findings)[: len(world.ledger.findings)] == list(world.ledger.findings)


def test_the_session_s_keyframes_are_its_world_s():
    session = TraceSession.replay(read(TORCH, found_again=False).events, keyframes=True)
    stream = list(session.events())
    assert session.keyframes is not None and session.ledger is session.world.ledger
    n = len(session.keyframes)
    assert n == len([e for e in stream if not isinstance(e, MADE_BY_THE_LEDGER)]) - 1  # the end
    fresh = TraceSession.replay(read(TORCH, found_again=False).events)
    for e in fresh.source.events():
        if fresh.world.folded == n:
            break
        fresh.fold(e)
    assert _seen(session.keyframes.at(n)) == _seen(fresh.world)


@pytest.fixture
def applied(monkeypatch):
    """How many events every ledger of this process folded."""
    count = [0]
    apply = Ledger.apply

    def counted(self, e):
        count[0] += 1
        return apply(self, e)

    monkeypatch.setattr(Ledger, "apply", counted)
    return count


def _once() -> int:
    """Each event of the recording once, but its end (``TraceFinished`` ends the fold)."""
    return len([e for e in _folded(RUN) if not isinstance(e, TraceFinished)])


@pytest.mark.parametrize(
    "argv",
    [["--text"], ["--perfetto", "{tmp}/t.json"], ["--step", "3", "--html", "{tmp}/p.html"]],
    ids=["text", "perfetto", "page"],
)
def test_a_replayed_trace_recording_is_folded_once(argv, applied, tmp_path, capsys):
    """Each event of the recording goes through a ledger once (the old replay folded it when it
    read the file, then again for the timeline, the text or Perfetto's file)."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["replay", str(RUN), *args]) == 0
    assert applied[0] == _once()
    if "--perfetto" in args:
        body = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
        flows = {e["name"] for e in body if e["ph"] == "s"}  # the world's matches
        assert "export → import" in flows and "fd 38 → fd 39" in flows


def test_the_inspector_s_replay_folds_once(applied):
    from vmmtui.cli.replay import load
    from vmmtui.tui.replay import ReplayApp

    app = ReplayApp(load(str(RUN)))
    assert applied[0] == _once()
    assert app.frames.timeline.world is not None  # the fold's world, kept for its frames
    assert resolve(str(RUN)).events  # read() alone still finds the findings again


@pytest.mark.parametrize("path", [TORCH, RUN, SHARES], ids=lambda p: p.name)
def test_the_world_at_each_frame_holds_the_fds_the_panel_shows_there(path: Path):
    """A replay's frame N asks its one fold's keyframes for the world there: the processes and
    the fds of interest of each are those the programs panel draws at that frame."""
    from vmmtui.pipeline.replay import trace_timeline
    from vmmtui.view import FrameStates, ScreenState

    timeline = trace_timeline(read(path, found_again=False).events)
    states = FrameStates(timeline, ScreenState.for_programs())
    frames = range(len(timeline.frames))
    step = max(1, len(timeline.frames) // 40)
    for k in [*frames[::step], frames[-1]]:
        world, v = timeline.world_at(k), states.at(k).programs
        assert v is not None
        pids = set(world.ledger.procs) | set(v.procs)
        assert {p: set(world.ledger.fds_of(p)) for p in pids} == {
            p: set(v.proc(p).fds) for p in pids
        }, k
