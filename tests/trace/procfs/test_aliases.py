"""One way to observe programs: ``trace`` (eBPF, or polling with ``--poll`` or where eBPF is
refused); ``attach`` and ``watch`` are its aliases. On real processes: ``trace -p`` starts from what
is already true (a memfd shared before the trace began is there at frame 0), the kill -9 of an
exporter whose importer still holds its memfd is reported, and the polling stream goes through the
trace's output paths (--json, -q, --record)."""

import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager, suppress

import pytest

from tests.commands import vmmtui
from tests.trace.procfs.helpers import FIXTURES, ROOT, of
from vmmtui.stream.events import Event, FdOpened, Leak, SharedFile, WatchFinished
from vmmtui.stream.observed import LedgerFinding, TraceCall, TraceFinished, TraceStarted
from vmmtui.trace.loader import why_not
from vmmtui.words.findings import finding_words

EBPF = why_not() is None


@contextmanager
def held_share(unmap: bool = False):
    """The pair of tests/fixtures/held_share.py, once both said ready: (exporter, importer, proc);
    the importer lets go when its stdin closes (``unmap``: it holds the fd alone)."""
    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "held_share.py")],
        cwd=FIXTURES,
        env={**os.environ, **({"FIXTURE_UNMAP": "1"} if unmap else {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    pids = {}
    try:
        for line in proc.stdout:
            said = re.match(r"\[(\d+)\] ready: (exported|imported)", line)
            if said:
                pids[said.group(2)] = int(said.group(1))
            if len(pids) == 2:
                break
        assert len(pids) == 2, pids
        yield pids["exported"], pids["imported"], proc
    finally:
        proc.stdin.close()
        for pid in pids.values():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=20)


def stream(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vmmtui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=FIXTURES,
        **kw,
    )


def read_until(p: subprocess.Popen, seen: list, done) -> Event | None:
    """Events of ``p``'s --json stream into ``seen`` until ``done(event)``; that event, or None at
    the end of the stream."""
    for line in p.stdout:
        e = Event.from_json(line)
        seen.append(e)
        if done(e):
            return e
    return None


def finish(p: subprocess.Popen) -> str:
    try:
        _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError("the trace did not end") from None
    return err


def held(e: Event) -> bool:
    return isinstance(e, SharedFile) and "fixture-held" in e.target and bool(e.same_description)


@pytest.mark.slow
def test_trace_p_shows_a_share_made_before_the_trace_at_frame_0():
    with held_share() as (exporter, importer, _):
        res = vmmtui("trace", "-p", str(exporter), str(importer), "--json", "--duration", "1")
    assert res.returncode == 0, res.stderr
    events = [Event.from_json(x) for x in res.stdout.splitlines()]
    assert isinstance(events[0], TraceStarted) and events[0].mode == ("ebpf" if EBPF else "polling")
    shared = [i for i, e in enumerate(events) if held(e)]
    calls = [i for i, e in enumerate(events) if isinstance(e, TraceCall)]
    assert shared and (not calls or shared[0] < calls[0]), events  # frame 0: before any call
    share = events[shared[0]]
    assert {h.pid for h in share.holders} == {exporter, importer}
    assert share.proof.endswith("(kcmp)") and importer in share.mapped_by
    present = [e for e in of(events, FdOpened) if "fixture-held" in e.target]
    assert {e.how for e in present} == {"present"}, present  # the direction was not seen: said so


@pytest.mark.slow
@pytest.mark.parametrize("poll", [False, True])
def test_kill_9_of_an_exporter_whose_importer_imported_before_the_trace_is_reported(poll):
    """The exporter is killed while the importer holds its memfd, both from before the trace began.
    eBPF: the ledger's finding at the exit (the importer holds the fd and maps it); polling: attach's
    leak (it holds the fd unmapped: a mapping is memory in use). Either way as "possible": the trace
    did not see which of them made it."""
    if not poll and not EBPF:
        pytest.skip(f"eBPF unavailable: {why_not()}")
    with held_share(unmap=poll) as (exporter, importer, proc):
        p = stream(
            "trace", "-p", str(exporter), str(importer), "--json", *(["--poll"] if poll else [])
        )
        seen: list = []
        try:
            assert read_until(p, seen, held), seen
            os.kill(exporter, signal.SIGKILL)
            proc.wait(timeout=20)  # the exporter is our child: reaped, as its parent would
            if poll:
                found = read_until(
                    p, seen, lambda e: isinstance(e, Leak) and e.kind == "possible-fd-after-peer"
                )
            else:
                found = read_until(
                    p,
                    seen,
                    lambda e: isinstance(e, LedgerFinding) and "held-after-exporter-died" in e.kind,
                )
            assert found is not None, seen[-10:]
            assert found.pid == importer, found
            if not poll:
                assert found.kind == "possible-held-after-exporter-died" and found.peer == exporter
                detail = finding_words(found).detail
                assert "SIGKILL" in detail and "fixture-held" in detail
                assert "which of them made it was not seen" in detail
            proc.stdin.close()  # the importer lets go and exits: the trace ends with its targets
            err = finish(p)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == 0 and "Traceback" not in err, err


@pytest.mark.slow
def test_trace_poll_of_a_command_is_the_trace_stream():
    res = vmmtui("trace", "--poll", "--json", "--", sys.executable, str(FIXTURES / "scm_pair.py"))
    assert res.returncode == 0, res.stderr
    events = [Event.from_json(x) for x in res.stdout.splitlines()]  # every line: an event
    first, last = events[0], events[-1]
    assert isinstance(first, TraceStarted) and first.mode == "polling" and not first.reason
    assert first.command[-1].endswith("scm_pair.py") and first.unprobed  # its blind spots
    assert isinstance(last, TraceFinished) and last.mode == "polling" and last.returncode == 0
    assert any(e.how == "arrived" for e in of(events, FdOpened) if "fixture-scm" in e.target)
    assert any("fixture-scm" in e.target for e in of(events, SharedFile))
    assert of(events, WatchFinished)[-1].returncode == 0


@pytest.mark.slow
def test_watch_and_attach_are_the_trace_stream():
    """The aliases run trace's code path: the same header (TraceStarted) and end (TraceFinished)."""
    watch = vmmtui("watch", "--json", "--", sys.executable, str(FIXTURES / "scm_pair.py"))
    assert watch.returncode == 0, watch.stderr
    w = [Event.from_json(x) for x in watch.stdout.splitlines()]
    assert isinstance(w[0], TraceStarted) and w[0].mode == "polling"
    assert isinstance(w[-1], TraceFinished) and of(w, SharedFile)
    with held_share() as (exporter, importer, _):
        attach = vmmtui("attach", str(exporter), str(importer), "--json", "--duration", "0.5")
        once = vmmtui("attach", "--once", str(exporter), str(importer), "--json")
    for res, mode in ((attach, "ebpf" if EBPF else "polling"), (once, "polling")):
        assert res.returncode == 0, res.stderr
        a = [Event.from_json(x) for x in res.stdout.splitlines()]
        assert isinstance(a[0], TraceStarted) and a[0].mode == mode, a[0]
        assert isinstance(a[-1], TraceFinished) and any(held(e) for e in a)


def test_the_aliases_call_trace():
    """One code path: ``attach`` and ``watch`` build trace's arguments and run ``cmd_trace``."""
    from vmmtui.cli import main, trace

    calls = []

    def spy(args):
        calls.append(args)
        return 0

    import vmmtui.cli.trace as module

    real = module.cmd_trace
    module.cmd_trace = spy
    try:
        assert main(["watch", "--interval", "0.2", "-q", "--", "true"]) == 0
        assert main(["attach", "--json", "--duration", "1", str(os.getpid())]) == 0
        assert main(["attach", "--all", "--prometheus", "127.0.0.1:1"]) == 0
        assert main(["attach", "--once", str(os.getpid())]) == 0
    finally:
        module.cmd_trace = real
    w, a, agent, once = calls
    assert (w.said_as, w.poll, w.interval, w.quiet, w.cmd) == (
        "watch",
        True,
        0.2,
        True,
        ["--", "true"],
    )
    assert (a.said_as, a.pids, a.poll, a.json, a.duration) == (
        "attach",
        [os.getpid()],
        False,
        True,
        1,
    )
    assert agent.all and agent.poll and agent.prometheus == "127.0.0.1:1"  # the polling agent
    assert once.once and once.leaks
    assert trace.run_as.__module__ == "vmmtui.cli.trace"


@pytest.mark.slow
def test_polling_quiet_prints_the_findings_and_a_recording_replays(tmp_path):
    fixture = str(FIXTURES / "leak_received.py")
    quiet = vmmtui("trace", "--poll", "-q", "--", sys.executable, fixture)
    assert quiet.returncode == 0, quiet.stderr
    lines = [x for x in quiet.stdout.splitlines() if not x.startswith("[")]  # not the fixture's
    assert lines[0].startswith("vmmtui trace: polling /proc")
    # kept until its normal exit: a fact (model/policy.py), said dim, never a leak
    assert any(
        "· possible-held-until-exit: " in x and "(a fact: the exit released it)" in x for x in lines
    ), lines
    assert not any("ARRIVED" in x or "SHARED" in x for x in lines), lines  # findings only
    rec = tmp_path / "poll.jsonl"
    res = vmmtui("watch", "--record", str(rec), "--", sys.executable, fixture)
    assert res.returncode == 0 and rec.exists(), res.stderr
    replay = subprocess.run(
        [sys.executable, "-m", "vmmtui", "replay", str(rec)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replay.returncode == 0, replay.stderr
    assert "vmmtui trace: polling /proc" in replay.stdout
    assert "· possible-held-until-exit: " in replay.stdout and "LEAK (" not in replay.stdout
