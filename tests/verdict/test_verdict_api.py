"""``vmmtui.tracing``: a block of this process traced with the processes it starts, by
``multiprocessing`` (fork and spawn) and by ``subprocess``, real memfds passed over SCM_RIGHTS;
the verdict's findings are the inspector's, the recording replays to them, the budget weighs the
memory still pinned at the end, and this process's own fds cause nothing."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vmmtui
from vmmtui.model.findings import Weight
from vmmtui.pipeline.session import refold
from vmmtui.record.recording import read
from vmmtui.stream.observed import LedgerFinding
from vmmtui.verdict.api import OVER_BUDGET, TraceError

SUITE = Path(__file__).resolve().parents[1] / "fixtures" / "verdict_suite"
sys.path.insert(0, str(SUITE))
from buckets import BUCKET, bucket, send_fd, sync  # noqa: E402

MODES = ["ebpf", "polling"]


def needs(mode: str) -> bool:
    """Whether the block polls (``mode`` polling), skipping where eBPF is asked and refused."""
    if mode == "ebpf":
        from vmmtui.trace.loader import why_not

        if reason := why_not():
            pytest.skip(f"eBPF unavailable: {reason}")
    return mode == "polling"


@pytest.mark.parametrize("start", ["fork", "spawn", "forkserver"])
def test_a_multiprocessing_child_that_keeps_what_it_took_is_the_problem(start, tmp_path):
    """tests/fixtures/verdict_suite/mp_block.py, in a process of its own (spawn's and
    forkserver's helpers live as long as the interpreter that used them)."""
    needs("ebpf")
    res = subprocess.run(
        [sys.executable, str(SUITE / "mp_block.py"), start, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=SUITE,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    said = json.loads(res.stdout.splitlines()[-1])
    me, keep, drop = said["me"], said["keep"], said["drop"]
    assert keep["exit"] == 0 and drop["exit"] == 0
    assert keep["mode"] == "ebpf" and keep["reason"] == ""
    # a worker that keeps the fd it took until its normal exit leaks nothing: the exit closed it
    # (CPython's own forkserver tests do this with the heap arena): a fact, said, not a problem
    assert keep["problems"] == [], keep["report"]
    (fact,) = [f for f in keep["facts"] if f["kind"] == "fd-never-closed"]
    assert fact["pid"] == keep["pid"] and fact["peer"] == me
    assert fact["what"].endswith("(memfd) held until exit")
    assert f"received it from pid {me}" in fact["detail"]
    assert "nothing wrong found" in keep["report"]
    # the bucket's share, proven (forkserver's helper also takes the pipe's fds: shares too)
    assert [keep["pid"], "struct file"] in keep["shared"]
    assert drop["problems"] == [], drop["report"]
    assert [drop["pid"], "struct file"] in drop["shared"]
    assert "nothing wrong found" in drop["report"]
    # the probe's fds went with the block (spawn's and forkserver's helpers keep theirs)
    left = keep["fds_left"] + drop["fds_left"]
    assert not [t for t in left if "bpf" in t or "perf_event" in t], left


@pytest.mark.parametrize("mode", MODES)
def test_subprocesses_sharing_buckets_the_recording_replays_to_the_same_verdict(mode, tmp_path):
    poll = needs(mode)
    path = tmp_path / "sync.jsonl"
    with vmmtui.tracing(poll=poll, record=path) as t:
        sync(steps=3, keep=True)
    assert t.mode == mode and t.recording == path and path.exists()
    assert not list(tmp_path.glob("*.part"))
    # each bucket kept to exit is a fact (the exit released it); eBPF names the pile as one
    # growth while it grew, one problem for the one relation
    held = [f for f in t.findings if f.kind == ("held-until-exit" if poll else "fd-never-closed")]
    assert len(held) == 3 and all(f.weight is Weight.QUIET for f in held), t.report()
    assert {f.kind for f in t.problems} <= {"growth"}
    assert len(t.problems) == (0 if poll else 1), t.report()
    if poll:
        assert t.reason == "asked (poll=True)"
        assert "polling (asked (poll=True)): " in t.report()
        assert "CUDA calls: not seen by polling" in t.report()
    # the recording says the same when replayed
    replayed = [e for e in refold(read(path).events) if isinstance(e, LedgerFinding)]
    live = [f.event for f in t.findings if isinstance(f.event, LedgerFinding)]
    assert [(e.kind, e.pid) for e in replayed] == [(e.kind, e.pid) for e in live]
    # and the healthy loop is healthy
    with vmmtui.tracing(poll=poll, record=False) as t:
        sync(steps=3, keep=False)
    assert not t.problems, t.report()
    assert t.recording is None
    if not poll:  # polling sees a share only where a poll falls while both hold it
        assert len([f for f in t.findings if f.kind == "shared"]) == 3


HOLDER = """
import array, os, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
fds = array.array("i")
_, anc, _, _ = sock.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
fds.frombytes(anc[0][2][: fds.itemsize])
sock.send(b"ok")
sys.stdin.read()  # holds the bucket until the test lets it go
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_the_budget_weighs_what_a_live_process_still_pins_at_the_end(mode, tmp_path):
    poll = needs(mode)
    for budget in (BUCKET - 1, BUCKET):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with vmmtui.tracing(poll=poll, max_pinned_bytes=budget, record=False) as t:
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.PIPE,
            )
            theirs.close()
            fd = bucket(3)
            send_fd(ours, fd)
            assert ours.recv(8) == b"ok"
            time.sleep(0.2)  # polling: a poll sees both hold it (kcmp: it crossed)
            os.close(fd)
        assert holder.stdin is not None
        holder.stdin.close()
        assert holder.wait(30) == 0
        ours.close()
        assert t.verdict is not None and t.verdict.pinned_bytes == BUCKET, t.report()
        if budget < BUCKET:
            (over,) = t.problems
            assert over.kind == OVER_BUDGET and over.weight is Weight.PROBLEM
            assert "1 MiB pinned across processes at the end of the block" in over.what
            assert f"pid {holder.pid}'s fd" in over.detail
        else:
            assert not t.problems, t.report()


def test_this_process_own_fds_cause_nothing(tmp_path):
    """The block's own process (a test runner: files, pipes, sockets, even a memfd of its own)
    is alive at the end and shared nothing: no finding."""
    needs("ebpf")
    with vmmtui.tracing(record=False) as t:
        r, w = os.pipe()
        a, b = socket.socketpair()
        memfd = os.memfd_create("ours", 0)
        with open(tmp_path / "f", "w") as f:
            f.write("x")
        dup = os.dup(memfd)
        for fd in (r, w, memfd, dup):
            os.close(fd)
        a.close()
        b.close()
    assert t.findings == () and t.verdict is not None and t.verdict.pinned_bytes == 0


def test_the_verdict_comes_after_the_block_and_allow_takes_kinds(tmp_path):
    needs("ebpf")
    with vmmtui.tracing(allow=["growth"], record=False) as t:
        with pytest.raises(TraceError, match="after the block"):
            _ = t.problems
        sync(steps=3, keep=True)
    assert not t.problems and t.verdict is not None
    assert [f.kind for f in t.verdict.allowed] == ["growth"]
    assert "1 allowed" in t.report()


def test_a_recording_that_cannot_be_written_is_one_line_before_the_block(tmp_path):
    with (
        pytest.raises(TraceError) as caught,
        vmmtui.tracing(poll=True, record=tmp_path / "no" / "such" / "dir.jsonl"),
    ):
        pytest.fail("the block ran")
    assert "\n" not in str(caught.value) and "record=" in str(caught.value)


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory) -> Path:
    """The project's stand-in libcuda (tests/fixtures/fake_libcuda.c), built for this module."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in libcuda")
    out = tmp_path_factory.mktemp("cuda") / "libcuda.so.1"
    src = str(SUITE.parent / "fake_libcuda.c")
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), src], check=True)
    return out


@pytest.mark.slow
@pytest.mark.serial  # the block's end waits on the trace's last records: under a loaded machine
# it outlasted the fixture's 60 s wait for go-grown once (exit 3); alone it takes about a second
def test_the_budget_counts_cuda_memory_an_importer_still_holds(fake_libcuda, tmp_path):
    """An exporter shares a 1 MiB allocation (cuMemExportToShareableHandle, SCM_RIGHTS); its
    importer imports it twice, maps it and still holds it when the block ends: 1 MiB pinned by
    another process, over a budget of 0, named with both pids."""
    needs("ebpf")
    script = SUITE.parent / "refcount_share.py"
    with vmmtui.tracing(libcuda=str(fake_libcuda), max_pinned_bytes=0, record=False) as t:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(fake_libcuda), str(tmp_path), "steps", "1"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("IMPORTED 1"):
                importer = int(line.split()[2])
                break
    (tmp_path / "go-grown").touch()  # the importer's last step waits for it
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert t.verdict is not None and t.verdict.pinned_bytes == 1 << 20, t.report()
    over = [f for f in t.problems if f.kind == OVER_BUDGET]
    assert len(over) == 1 and f"by pid {importer}" in over[0].detail, t.report()
    assert "CUDA allocation" in over[0].detail


@pytest.mark.parametrize("mode", MODES)
def test_a_zombie_child_of_this_process_is_said_not_read_never_a_problem(mode):
    """A child that earlier code started and has not waited for (a zombie: its fd table is
    gone) cannot be read; nothing of it is judged, and nothing fails."""
    poll = needs(mode)
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    try:
        with vmmtui.tracing(poll=poll, record=False) as t:
            time.sleep(0.2)  # polling: a few polls
    finally:
        zombie.wait()
    assert not t.problems, t.report()  # earlier tests' zombies, if any, are said not read too


@pytest.mark.slow
def test_the_uprobes_come_off_with_the_block_and_leave_nothing(fake_libcuda):
    """The probe, its maps and libcuda's uprobes are open for the block and gone after it."""
    needs("ebpf")

    def probe_fds() -> set[str]:
        out = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if "bpf" in target or "perf_event" in target:
                out.add(fd)
        return out

    before = probe_fds()
    with vmmtui.tracing(libcuda=str(fake_libcuda), record=False) as t:
        assert probe_fds() - before  # the probe, its maps and its uprobes are open
    assert t.verdict is not None and t.findings == ()
    assert probe_fds() - before == set()  # closed with the block
