"""Polling says only what it saw (issue 48 part 4), on real processes: a /dev/shm file another
program made meanwhile is never the watched command's, memory kept as a mapping after its fd
closed is a pin (a possible finding, its bytes from the mapping's length), every claim is
``possible-…``, and the budget weighs what polling sees held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

from tests.trace.procfs.helpers import FIXTURES, ROOT, of
from vmmtui.stream.events import Event, Leak, MappingGone, MappingSeen, Notice


def _lines(stream) -> list[Event]:
    return [Event.from_dict(json.loads(x)) for x in stream.splitlines() if x.startswith("{")]


def test_a_dev_shm_file_another_program_made_during_a_watch_is_not_the_commands():
    """The watched command only waits; this test (no process of its tree) makes a /dev/shm file
    while it runs and closes it: the file is left, made after the watch began, held by no one,
    and still not the command's leak (old code: ``shm-file`` blamed on the command)."""
    name = f"/dev/shm/vmmtui-stranger-{uuid.uuid4().hex[:8]}"
    wait = (
        "import os, sys, time\n"
        "print('up', flush=True)\n"
        f"while not os.path.exists({name!r} + '.done'): time.sleep(0.02)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "watch", "--json", "--no-nvml", "--",
         sys.executable, "-c", wait],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=FIXTURES,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.strip() == "up":
                break
        with open(name, "w") as f:  # another program's file: made, written, closed
            f.write("not the command's")
        open(name + ".done", "w").close()
        out, err = proc.communicate(timeout=60)
    finally:
        for path in (name, name + ".done"):
            if os.path.exists(path):
                os.unlink(path)
    assert proc.returncode == 0, err
    events = _lines(out)
    assert not [e for e in of(events, Leak) if "vmmtui-stranger" in e.what], of(events, Leak)
    from vmmtui.words.notices import text_of

    said = [text_of(e) for e in of(events, Notice) if "vmmtui-stranger" in text_of(e)]
    assert said and "not counted as a leak" in said[0], of(events, Notice)


def _watched(*args: str, gap: str = "0.25") -> list[Event]:
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "watch", "--json", "--no-nvml", "--",
         sys.executable, str(FIXTURES / "memfd_pins.py"), *args],
        capture_output=True, text=True, timeout=120, cwd=FIXTURES,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FIXTURE_GAP": gap, "FIXTURE_HOLD": "0.3"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    return _lines(res.stdout)


def test_an_engine_that_keeps_every_bucket_as_a_mapping_is_a_possible_growth():
    """memfd_pins.py maps: each round a fresh 64 KiB memfd arrives, is mapped and its fd closed
    at once; the mapping is kept. No fd of it is ever left to see (old code: 0 findings): the
    mappings are the pins, their lengths the bytes, and the claim is possible, never definite."""
    events = _watched("maps", "6")
    mapped = [e for e in of(events, MappingSeen) if "bucket-" in e.path]
    assert len({e.path for e in mapped}) == 6, mapped
    importer = mapped[0].pid
    growth = [e for e in of(events, Leak) if e.kind == "possible-growth"]
    assert growth and {e.pid for e in growth} == {importer}, of(events, Leak)
    peak = growth[-1]
    # said again each time the pile doubles (mappings.py ``_piles``): the last said is at most
    # the 6 kept, at least half of it; its bytes are its pieces' mapping lengths
    # the polls of a loaded machine skip steps (a CI run said 5, then nothing more): the last
    # growth said is between the rule's 4 rises and the 6 kept
    assert 4 <= peak.pins <= 6 and peak.size == peak.pins * (64 << 10), peak
    assert [e.pins for e in growth] == sorted(e.pins for e in growth)  # it follows the pile
    kept = [e for e in of(events, Leak) if e.kind == "possible-held-until-exit"]
    assert kept and sum(k.pins for k in kept) == 6 and "mapped" in kept[0].what, kept
    assert all(e.kind.startswith("possible-") for e in of(events, Leak)), of(events, Leak)
    assert "not seen" in peak.detail  # what polling cannot see, said with the claim


def test_a_receiver_that_keeps_the_latest_bucket_is_no_growth():
    """memfd_pins.py maps-latest: each bucket is mapped, and the one before it unmapped; the
    last is held to the exit: nothing grows (a quiet possible-held-until-exit of one piece)."""
    events = _watched("maps-latest", "6")
    assert len({e.path for e in of(events, MappingSeen) if "bucket-" in e.path}) >= 5, events
    assert [e for e in of(events, MappingGone) if "bucket-" in e.path], of(events, MappingGone)
    said = of(events, Leak)
    assert [e.kind for e in said] == ["possible-held-until-exit"] and said[0].pins == 1, said


ENGINE = """
import array, ctypes, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
sock = socket.socket(fileno=int(sys.argv[1]))
fds = array.array("i")
_, anc, _, _ = sock.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
fds.frombytes(anc[0][2][: fds.itemsize])
kept = libc.mmap(None, 2 << 20, 1, 1, fds[0], 0)  # PROT_READ, MAP_SHARED: no fd of its own
os.close(fds[0])  # the engine keeps the mapping alone
sock.send(b"ok")
sys.stdin.read()  # holds it until the test lets it go
"""


def test_the_budget_under_polling_weighs_what_a_live_engine_still_maps():
    """A live engine received a 2 MiB memfd, mapped it and closed its fd; the block ends while
    it holds the mapping. Polling sees it held (old code: 0 B, the budget passed)."""
    import socket
    import time

    import vmmtui
    from vmmtui.verdict.api import OVER_BUDGET

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with vmmtui.tracing(poll=True, max_pinned_bytes=1 << 20, record=False) as t:
        engine = subprocess.Popen(
            [sys.executable, "-c", ENGINE, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.PIPE,
        )
        theirs.close()
        fd = os.memfd_create("engine-bucket", 0)
        os.ftruncate(fd, 2 << 20)
        time.sleep(0.2)  # a poll sees this process hold it first: the engine's is one that came
        ours.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, bytes(memoryview(
            __import__("array").array("i", [fd]))))])  # fmt: skip
        assert ours.recv(8) == b"ok"
        time.sleep(0.2)  # a poll sees the engine's mapping
        os.close(fd)
        time.sleep(0.2)  # and that this process let its own copy go
    assert engine.stdin is not None
    engine.stdin.close()
    assert engine.wait(30) == 0
    ours.close()
    assert t.verdict is not None and t.verdict.pinned_bytes == 2 << 20, t.report()
    over = [f for f in t.problems if f.kind == OVER_BUDGET]
    assert over and f"pid {engine.pid}'s mapping of /memfd:engine-bucket" in over[0].detail, (
        t.report()
    )


def test_a_queue_consumer_that_closes_every_fd_is_never_said_to_hold_one_until_exit():
    """queue_consumer.py: every received fd is closed (the last just before the exit); each
    piece is mapped in place of the one before, so the process's size does not move. Old code
    kept the stale maps and said a definite ``held-until-exit`` of the last fd, closed. Now the
    fd is seen mapped; what lasts to the exit is the mapping, said as possible."""
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "watch", "--json", "--no-nvml", "--",
         sys.executable, str(FIXTURES / "queue_consumer.py"), "5"],
        capture_output=True, text=True, timeout=120, cwd=FIXTURES,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FIXTURE_HOLD": "0.3"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    events = _lines(res.stdout)
    said = of(events, Leak)
    assert all(e.kind.startswith("possible-") for e in said), said
    assert not [e for e in said if " fd " in e.what and "piece-" in e.what], said
    kept = [e for e in said if e.kind == "possible-held-until-exit"]
    assert kept and kept[0].pins == 1 and "mapped" in kept[0].what, said


def test_polling_says_a_hold_again_at_the_policys_teardown_window():
    """A source may not import the model: its copy of the window is the policy's."""
    from vmmtui.model.policy import TEARDOWN_WINDOW_S
    from vmmtui.trace.procfs import mappings

    assert mappings.TEARDOWN_WINDOW_S == TEARDOWN_WINDOW_S
