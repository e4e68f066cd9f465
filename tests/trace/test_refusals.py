"""A refused pidfd_getfd is explained from what decided it, read by the kernel at the call: a
process that exits at once is still named with both uids (20 of 20), in a PID namespace and under
a seccomp filter too; one cause, one fix consistent with it, processes by pid and role, said once.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tracing import vmmtui_trace
from vmmtui.stream.events import Event
from vmmtui.stream.observed import CallRefused, ProcessFacts
from vmmtui.trace.records import HEAD, REFUSAL, SIDE, Decoder, FileNames
from vmmtui.trace.refusals import explain
from vmmtui.words.refusals import SCM_WORKS, finding, worded

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUICK = str(FIXTURES / "pidfd_refused_quick.py")
ROOT = Path(__file__).resolve().parents[2]


def facts(pid, role, uid, cap=0, **kw) -> ProcessFacts:
    base = dict(
        comm="python3", euid=uid, suid=uid, gid=uid, egid=uid, sgid=uid, cap_eff=cap, cap_prm=cap,
        userns=1, pidns=2, seccomp=0, filters=0, dumpable=1,
    )  # fmt: skip
    base.update(kw)
    return ProcessFacts(pid, role, base.pop("comm"), uid, **base)


ROOT_CAPS = (1 << 41) - 1


# -- the words, from facts ------------------------------------------------------------------------
def test_across_uids_the_cause_names_both_processes_and_one_fix_without_yama(monkeypatch):
    from vmmtui.trace import refusals

    monkeypatch.setattr(refusals, "yama_now", lambda: "not loaded")
    e = explain(
        "pidfd_getfd", 812, 800, 1, 5, 1,
        (facts(812, "importer", 65534), facts(800, "exporter", 0, ROOT_CAPS)),
    )  # fmt: skip
    cause, fix = worded(e)
    assert "pid 812 (python3, importer) runs as uid 65534" in cause
    assert "pid 800 (python3, exporter) as uid 0" in cause
    assert "812 lacks CAP_SYS_PTRACE" in cause
    assert "ptrace_scope" not in fix and "yama" not in fix.lower()  # Yama is not loaded
    assert fix.count("CAP_SYS_PTRACE") == 1 and fix.endswith(SCM_WORKS)
    for text in (cause, fix, *(finding(e, c) for c in e.checks)):
        assert " A " not in f" {text} " and " B " not in f" {text} " and "B's" not in text
    assert e.checks[0].ok is False and e.checks[0].name == "uid and gid"
    yama = [c for c in e.checks if c.name == "yama"][0]
    assert yama.ok is True and finding(e, yama) == "Yama is not loaded"
    assert (e.caller.uid, e.exporter.uid, e.yama) == (65534, 0, "not loaded")


def test_yama_1_alone_refusing_gets_the_ptracer_fix(monkeypatch):
    from vmmtui.trace import refusals

    monkeypatch.setattr(refusals, "yama_now", lambda: "1")
    monkeypatch.setattr(refusals, "is_ancestor", lambda a, b: False)
    e = explain(
        "pidfd_getfd", 812, 800, 1, 5, 1,
        (facts(812, "importer", 1000), facts(800, "exporter", 1000)),
    )  # fmt: skip
    cause, fix = worded(e)
    assert "Yama's ptrace_scope is 1" in cause and "uid" not in cause
    assert "prctl(PR_SET_PTRACER, 812)" in fix and "pid 800 (python3, exporter)" in fix


def test_a_seccomp_filter_that_alone_refuses_is_named_with_the_containers_rule(monkeypatch):
    from vmmtui.fleet.facts import refusal_reason
    from vmmtui.trace import refusals

    monkeypatch.setattr(refusals, "yama_now", lambda: "not loaded")
    e = explain(
        "pidfd_getfd", 812, 800, 1, 5, 1,
        (
            facts(812, "importer", 0, ROOT_CAPS, seccomp=2, filters=1),
            facts(800, "exporter", 0, ROOT_CAPS),
        ),
    )  # fmt: skip
    cause, fix = worded(e)
    assert "runs under a seccomp filter (1 filter) that refused it" in cause
    assert "Docker's allows pidfd_getfd only to a process with CAP_SYS_PTRACE" in cause
    assert "seccomp profile" in fix and SCM_WORKS not in fix
    assert refusal_reason(e) == "seccomp"


def test_the_refusal_travels_as_its_reason_and_facts_and_an_old_one_keeps_its_words(monkeypatch):
    """The event holds no sentence (its reason is a code, each check a name and a verdict): the
    words are made where it is drawn. A refusal an older vmmtui recorded with its words (no
    reason) is drawn in those words; an errno the reasons do not know is said by its name."""
    from vmmtui.stream.observed import RefusalCheck, RefusalReason
    from vmmtui.trace import refusals

    monkeypatch.setattr(refusals, "yama_now", lambda: "not loaded")
    e = explain(
        "pidfd_getfd", 812, 800, 1, 5, 1,
        (facts(812, "importer", 65534), facts(800, "exporter", 0, ROOT_CAPS)),
    )  # fmt: skip
    assert e.reason == RefusalReason.PTRACE and not e.cause and not e.fix
    assert not any(c.finding for c in e.checks) and "ptrace access" not in e.to_json()
    assert Event.from_json(e.to_json()) == e and worded(Event.from_json(e.to_json()))[0]
    gone = explain("pidfd_getfd", 812, 800, 9, 5, 1)  # EBADF: fd 5 closed
    assert gone.reason == RefusalReason.FD_NOT_OPEN
    assert worded(gone)[0].startswith("fd 5 is not open in pid 800")
    old_check = RefusalCheck("yama", True, "Yama then")
    old = CallRefused(
        812, "pidfd_getfd", "EPERM", 800, "the cause then", "the fix then", 1, [old_check]
    )
    assert (
        worded(old) == ("the cause then", "the fix then") and finding(old, old_check) == "Yama then"
    )
    other = explain("pidfd_open", 812, 800, 22)  # EINVAL
    assert worded(other) == ("pidfd_open failed with EINVAL (Invalid argument)", "")


def test_the_decoder_reads_the_kernels_refusal_record():
    side = SIDE.pack(812, 65534, 65534, 65534, 65534, 65534, 65534, 7, 8, 2, 1, 1, 0, 0, b"py\0")
    other = SIDE.pack(800, 0, 0, 0, 0, 0, 0, 7, 9, 0, 0, 1, 5, 5, b"python3\0")
    raw = HEAD.pack(REFUSAL, 812, 813, 0, 1, 0, 3, 5, 800, 0) + side + other
    d = Decoder(FileNames())
    assert d(raw) == []
    caller, exporter = d.refusals[813]
    assert (caller.pid, caller.role, caller.comm, caller.uid, caller.filters) == (
        812, "importer", "py", 65534, 1,
    )  # fmt: skip
    assert (exporter.pid, exporter.pidns, exporter.cap_eff, exporter.source) == (
        800, 9, 5, "kernel",
    )  # fmt: skip


# -- real processes, traced ---------------------------------------------------------------------------
def _trace(*args: str) -> subprocess.CompletedProcess:
    """A trace of the quick refuser (the test asks for ``ebpf``), which needs root itself."""
    if os.geteuid() != 0:
        pytest.skip("needs root: the refused process runs under another uid")
    return vmmtui_trace(*args, timeout=120, env={"PYTHONPATH": str(ROOT)})


def _refusals(res) -> list[CallRefused]:
    events = [Event.from_json(x) for x in res.stdout.splitlines()]
    return [e for e in events if isinstance(e, CallRefused)]


@pytest.mark.slow
def test_a_refusal_by_a_process_that_exits_at_once_is_named_with_both_uids_20_of_20(ebpf):
    named = 0
    for _ in range(20):
        res = _trace("--text", "--", sys.executable, QUICK)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
        said = [x for x in res.stdout.splitlines() if "pidfd_getfd refused (EPERM)" in x]
        assert len(said) == 1, res.stdout  # printed once
        line = said[0]
        assert "no cause readable" not in line and " A " not in line
        both = r"\(python3?, importer\) runs as uid 65534.* \(python3?, exporter\) as uid 0"
        named += bool(re.search(both, line))
    assert named == 20


@pytest.mark.slow
def test_the_refusal_carries_the_kernels_facts_in_the_stream(ebpf):
    res = _trace("--json", "--", sys.executable, QUICK)
    [e] = _refusals(res)
    assert e.caller is not None and e.exporter is not None
    assert (e.caller.source, e.exporter.source) == ("kernel", "kernel")
    assert (e.caller.uid, e.caller.gid, e.exporter.uid) == (65534, 65534, 0)
    assert e.caller.cap_eff == 0 and e.exporter.cap_eff >> 19 & 1
    assert e.caller.pidns == e.exporter.pidns == os.stat("/proc/self/ns/pid").st_ino
    assert e.caller.dumpable in (0, 1) and e.exporter.dumpable == 1


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")
def test_a_refusal_inside_a_pid_namespace_is_explained_with_its_namespace(ebpf):
    res = _trace("--json", "--", "unshare", "-p", "-f", sys.executable, QUICK)
    [e] = _refusals(res)
    mine = os.stat("/proc/self/ns/pid").st_ino
    assert e.caller.pidns == e.exporter.pidns != mine  # read in the kernel, inside it
    assert e.caller.pid == e.pid and e.exporter.pid == e.target  # pids as vmmtui sees them
    cause, _ = worded(e)
    assert "runs as uid 65534" in cause and "as uid 0" in cause


@pytest.mark.slow
def test_a_refusal_by_a_seccomp_filter_is_named_as_such(ebpf):
    res = _trace("--json", "--", sys.executable, QUICK, "seccomp")
    [e] = _refusals(res)
    assert e.caller.seccomp == 2 and e.caller.filters >= 1 and e.caller.uid == 0
    cause, _ = worded(e)
    assert "seccomp filter" in cause and "Docker's" in cause
    assert [c.name for c in e.checks if c.ok is False] == ["seccomp"]
