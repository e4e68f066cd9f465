"""Received fds kept until exit, traced in real processes: facts, never problems (model/policy.py:
the exit released them). tests/fixtures/keeps_received.py sends a socket, a pipe and a memfd in
one SCM_RIGHTS message and the receiver exits holding all three; nginx's workers keep the
channels their master sent them. The memfd is counted as memory held until exit, the socket, the
pipe and nginx's channels by their kind, on the end line, in --json and in the metrics alike.
Slow tier; skipped with the reason where eBPF or nginx is missing."""

import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.tracing import said, stream, vmmtui_trace
from vmmtui.fleet.facts import SharingFacts
from vmmtui.model.findings import MEMORY_FILES, Weight
from vmmtui.model.policy import weigh
from vmmtui.stream.events import Event
from vmmtui.stream.observed import LedgerFinding

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ebpf")]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def trace(mode: str, *command: str) -> subprocess.CompletedProcess:
    env = {"FIXTURE_HOLD": "0.2", "NO_COLOR": "1"}
    res = vmmtui_trace(mode, "--no-cuda", "--", *command, timeout=300, env=env)
    assert res.returncode == 0, said(res)
    return res


def events_of(res: subprocess.CompletedProcess) -> tuple[list[Event], list[dict]]:
    lines = stream(res)
    return [Event.from_dict(d) for d in lines], lines


def one_count(events: list[Event], lines: list[dict]) -> dict:
    """The end's counts, checked against the stream's findings and the metrics' fold of them."""
    [end] = [d for d in lines if d["event"] == "TraceFinished"]
    found = [e for e in events if isinstance(e, LedgerFinding)]
    weights = Counter(weigh(f) for f in found)
    assert end["findings"] == len(found)
    assert (end["problems"], end["quiet"]) == (weights[Weight.PROBLEM], weights[Weight.QUIET])
    facts = SharingFacts()
    for e in events:
        facts.feed(e)
    assert facts.weights == weights
    return end


def test_a_kept_memfd_socket_and_pipe_are_facts_the_memfd_counted_as_memory():
    res = trace("--json", sys.executable, str(FIXTURES / "keeps_received.py"))
    events, lines = events_of(res)
    kept = {
        d["name"]: d["kind"]
        for d in lines
        if d["event"] == "LedgerFinding" and d["kind"] not in ("shared", "imported")
    }
    assert kept == {
        "memfd": "fd-never-closed",
        "socket": "fd-closed-by-exit",
        "pipe": "fd-closed-by-exit",
    }
    end = one_count(events, lines)
    assert (end["problems"], end["quiet"], end["quiet_by"]) == (
        0, 3, {"held until exit": 1, "socket": 1, "pipe": 1}
    )  # fmt: skip
    [leak] = [d for d in lines if d.get("kind") == "fd-never-closed"]
    facts = SharingFacts()
    for e in events:
        facts.feed(e)
    assert facts.never_closed == {leak["pid"]: 1}  # the metric counts the memfd alone


def test_the_text_folds_the_facts_into_the_end_line():
    res = trace("--text", sys.executable, str(FIXTURES / "keeps_received.py"))
    out = res.stdout
    assert not [line for line in out.splitlines() if "fd-closed-by-exit:" in line]
    assert not [line for line in out.splitlines() if "⚠" in line], out  # nothing to act on
    assert (
        "6 findings (1 held until exit, released by it; 2 other received fds held until exit: "
        "1 pipe, 1 socket)" in out
    )
    assert "verdict: nothing to look at" in out


def test_nginx_workers_keeping_their_channels_is_no_problem(tmp_path):
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed (apt-get install nginx)")
    res = trace(
        "--json", sys.executable, str(FIXTURES / "real_run.py"), str(tmp_path), "", "nginx", "4"
    )
    events, lines = events_of(res)
    kinds = Counter(d["kind"] for d in lines if d["event"] == "LedgerFinding")
    assert kinds["shared"] >= 6  # 0 + 1 + 2 + 3 channels for the workers before each
    assert kinds["fd-closed-by-exit"] >= 1 and "fd-never-closed" not in kinds, kinds
    assert {d["name"] for d in lines if d.get("kind") == "fd-closed-by-exit"} == {"socket"}
    end = one_count(events, lines)
    assert end["problems"] == 0 and end["quiet_by"] == {"socket": kinds["fd-closed-by-exit"]}


def test_chromium_keeping_its_channels_and_files_is_no_problem(tmp_path):
    """Chromium's processes keep the Mojo sockets, the resource files and the shared regions they
    were sent until they exit (a headless run: dozens): facts, all of them; nothing to look at."""
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    res = trace(
        "--json", sys.executable, str(FIXTURES / "real_run.py"), str(tmp_path), "", "chromium"
    )
    events, lines = events_of(res)
    found = [d for d in lines if d["event"] == "LedgerFinding"]
    quiet = [d for d in found if d["kind"] == "fd-closed-by-exit"]
    never = [d for d in found if d["kind"] == "fd-never-closed"]
    assert len(quiet) >= 10, Counter(d["kind"] for d in found)
    assert {d["name"] for d in quiet} <= {"socket", "file", "pipe", "anon inode"}, quiet[:3]
    assert {d["name"] for d in never} <= MEMORY_FILES | {""}, never[:3]
    end = one_count(events, lines)
    assert end["quiet"] >= len(quiet) + len(never)
    assert end["problems"] == 0, [d for d in found if weigh(Event.from_dict(d)) is Weight.PROBLEM]
