"""Received fds kept until exit, traced in real processes: a problem where the file carries
memory, a quiet fact where it does not. tests/fixtures/keeps_received.py sends a socket, a pipe
and a memfd in one SCM_RIGHTS message and the receiver exits holding all three; nginx's workers
keep the channels their master sent them. The memfd is "to look at"; the socket, the pipe and
nginx's channels are counted apart, on the end line, in --json and in the metrics alike. Slow
tier; skipped with the reason where eBPF or nginx is missing."""

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


def test_a_kept_memfd_is_to_look_at_a_kept_socket_and_pipe_are_facts():
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
    assert (end["problems"], end["quiet"], end["quiet_by"]) == (1, 2, {"socket": 1, "pipe": 1})
    [leak] = [d for d in lines if d.get("kind") == "fd-never-closed"]
    facts = SharingFacts()
    for e in events:
        facts.feed(e)
    assert facts.never_closed == {leak["pid"]: 1}  # the metric counts the memfd alone


def test_the_text_folds_the_facts_into_the_end_line_and_keeps_the_memfd_line():
    res = trace("--text", sys.executable, str(FIXTURES / "keeps_received.py"))
    out = res.stdout
    assert not [line for line in out.splitlines() if "fd-closed-by-exit:" in line]
    [leak] = [line for line in out.splitlines() if "fd-never-closed:" in line]
    assert "(memfd) held until exit" in leak and "fix: close the fd once it is mapped" in leak
    assert (
        "6 findings (1 to look at; 2 other received fds held until exit: 1 pipe, 1 socket)" in out
    )


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
    """Chromium's processes keep the Mojo sockets and the resource files they were sent until
    they exit (a headless run: dozens): facts. The memfds they keep are still to look at."""
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
    assert end["quiet"] == len(quiet) and end["problems"] >= len(never)
