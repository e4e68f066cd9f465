"""What the kernel side records of mappings, dups and exec, under real programs
(tests/fixtures/mapped_share.py): an mmap of a file that may carry memory is a ``MemoryMapped``
with the address the kernel returned and the file's key as its send and receive name it; the
unmaps that touch such a mapping are ``MemoryUnmapped`` and no other unmap reaches userspace; a
/dev/shm file is named as such, in a send's kinds and in its mapping; the dup family of a followed
file; the fds of interest an exec closes (close-on-exec); a mapping a child inherits. Needs root,
BTF and libbpf: skipped with the reason elsewhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.stream.observed import (
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    MemoryMapped,
    MemoryUnmapped,
    ProcessForked,
    TraceCall,
)
from vmmtui.trace.records import Decoder, FileNames

pytestmark = pytest.mark.usefixtures("ebpf")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mapped_share.py"
MIB = 1 << 20


@pytest.fixture(scope="module")
def probe():
    from vmmtui.trace.loader import Probe

    p = Probe()
    p.attach_syscalls()
    yield p
    p.close()


def run(probe, mode: str) -> tuple[list[dict], list[TraceCall], str]:
    """The fixture in ``mode``, followed from its first instruction (it waits for a byte on stdin
    until the probe follows it): its truth, the trace's events in the kernel's order, its stdout."""
    code = (
        "import runpy, sys; sys.stdin.read(1); "
        f"sys.argv = [{str(FIXTURE)!r}, {mode!r}]; "
        f"runpy.run_path({str(FIXTURE)!r}, run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    records: list[bytes] = []
    try:
        probe.follow(proc.pid)
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write("g")
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(timeout=60)
        proc.stdout.close()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records += probe.poll(0)
    assert proc.returncode == 0, out
    decode = Decoder(FileNames())
    events = [e for raw in records for e in decode(raw)] + decode.flush()
    events.sort(key=lambda e: e.ktime)
    truth = [
        json.JSONDecoder().raw_decode(line[6:])[0]
        for line in out.splitlines()
        if line.startswith("TRUTH ")
    ]
    return truth, events, out


def of(events: list[TraceCall], *kinds: type, pids: set[int] | None = None) -> list[TraceCall]:
    return [e for e in events if isinstance(e, kinds) and (pids is None or e.pid in pids)]


@pytest.mark.parametrize("mode", ["memfd", "shm"])
def test_a_received_file_mapped_then_closed_then_unmapped_is_followed_in_order(probe, mode):
    truth, events, _ = run(probe, mode)
    mapped = next(t for t in truth if t["op"] == "map")
    sent = next(t for t in truth if t["op"] == "send")
    child = mapped["pid"]
    (send,) = of(events, FdsSent)
    (got,) = of(events, FdsReceived, pids={child})
    steps = of(events, MemoryMapped, MemoryUnmapped, FdCloseCall, pids={child})
    assert [type(e).__name__ for e in steps] == ["MemoryMapped", "FdCloseCall", "MemoryUnmapped"]
    m, close, unmap = steps
    assert isinstance(m, MemoryMapped) and isinstance(unmap, MemoryUnmapped)
    assert (m.fd, m.addr, m.length, m.result) == (mapped["fd"], mapped["addr"], MIB, 0)
    assert m.file == got.files[0] == send.files[0] != ""  # the file the sender sent
    assert m.kind == sent["name"]  # memfd:mapped-share, /dev/shm/vmmtui-mapped-PID
    assert (m.prot, m.flags, m.offset) == (3, 1, 0)
    assert isinstance(close, FdCloseCall) and close.file == m.file
    assert (unmap.addr, unmap.length, unmap.result, unmap.call) == (
        mapped["addr"],
        MIB,
        0,
        "munmap",
    )
    assert send.kinds == ["memfd" if mode == "memfd" else "shm"]


def test_the_unmaps_of_anonymous_memory_never_reach_userspace(probe):
    before = probe.unrecorded()
    truth, events, _ = run(probe, "malloc")
    seen = probe.unrecorded()
    # counted in the kernel, never sent up: 2,000 anonymous mmaps and their munmaps
    assert seen["mmap"] - before["mmap"] >= 2000 and seen["unmap"] - before["unmap"] >= 2000
    mapped = next(t for t in truth if t["op"] == "map")
    assert next(t for t in truth if t["op"] == "anonymous")["count"] == 2000
    unmaps = of(events, MemoryUnmapped)
    assert [(u.addr, u.length) for u in unmaps] == [(mapped["addr"], MIB)], unmaps[:5]
    assert len(of(events, MemoryMapped)) == 1


def test_an_mremap_moves_what_is_kept(probe):
    truth, events, _ = run(probe, "mremap")
    moved = next(t for t in truth if t["op"] == "mremap")
    last = next(t for t in truth if t["op"] == "unmap")
    unmaps = of(events, MemoryUnmapped)
    assert [(u.call, u.addr, u.length, u.new_addr, u.new_length) for u in unmaps] == [
        ("mremap", moved["addr"], MIB, moved["new_addr"], 4 * MIB),
        ("munmap", last["addr"], 4 * MIB, 0, 0),
    ]


def test_every_dup_of_a_mapped_shm_file_names_its_file(probe):
    truth, events, _ = run(probe, "dups")
    made = next(t for t in truth if t["op"] == "dups")
    (m,) = of(events, MemoryMapped)
    assert m.kind.startswith("/dev/shm/vmmtui-mapped-")
    dups = of(events, FdDuplicated)
    assert {(d.call, d.fd) for d in dups} >= {
        ("fcntl", made["made"]["dup"]),  # os.dup: fcntl(F_DUPFD_CLOEXEC)
        ("dup2", 60),
        ("dup3", 61),
        ("fcntl", made["made"]["F_DUPFD"]),
        ("fcntl", made["made"]["F_DUPFD_CLOEXEC"]),
    }
    assert {d.file for d in dups} == {m.file}
    assert all(d.old == made["old"] for d in dups if d.fd in made["made"].values())
    closes = {c.fd for c in of(events, FdCloseCall) if c.file == m.file}
    assert set(made["made"].values()) | {made["old"]} <= closes


def test_an_exec_closes_what_was_close_on_exec_and_keeps_the_rest(probe):
    truth, events, out = run(probe, "exec")
    fds = next(t for t in truth if t["op"] == "exec")
    after = next(line for line in out.splitlines() if line.startswith("AFTER "))
    assert json.loads(after[6:]) == {"kept": True, "closed": False}
    at_exec = [c for c in of(events, FdCloseCall) if c.call == "exec"]
    assert [c.fd for c in at_exec] == [fds["closed"]]
    assert at_exec[0].file != ""


def test_a_forked_child_unmaps_its_copy_of_a_mapping(probe):
    truth, events, _ = run(probe, "fork")
    mapped = next(t for t in truth if t["op"] == "map")
    child = next(t for t in truth if t["op"] == "child")["child"]
    (fork,) = of(events, ProcessForked)
    assert fork.child == child
    unmaps = of(events, MemoryUnmapped)
    assert [(u.pid, u.addr) for u in unmaps] == [
        (child, mapped["addr"]),
        (mapped["pid"], mapped["addr"]),
    ]


def test_a_trace_says_what_the_kernel_looked_at_and_kept_to_itself():
    """The end of a trace (--json) carries the kernel's counts of the calls worth no record: the
    2,000 anonymous mappings of the malloc loop and their unmaps, which never came as events."""
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "-q", "--no-cuda", "--",
         sys.executable, str(FIXTURE), "malloc"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    (end,) = [e for e in events if e["event"] == "TraceFinished"]
    assert end["unrecorded"]["mmap"] >= 2000 and end["unrecorded"]["unmap"] >= 2000
    assert sum(e["event"] == "MemoryUnmapped" for e in events) == 1
