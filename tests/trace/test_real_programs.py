"""Real programs that pass fds between their own processes, traced, with every receive's send
(its process, fd and socket) checked against an independent record of the same run: an
LD_PRELOAD shim's (tests/fixtures/fdlog_shim.c, run by tests/fixtures/real_run.py), which logs
each process's socketpairs and the fds it sent and received on them, so the k-th message sent on
a socket is the k-th received on its peer. nginx's master hands each new worker's channel to the
workers before it (28 receives with 8 workers, the same open file over several sockets at once);
Chromium's processes pass their Mojo channels and shared memory. Slow tier; skipped with the
reason where nginx, Chromium, a C compiler or eBPF is missing."""

import shutil
import subprocess
from collections import defaultdict, deque
from pathlib import Path

import pytest

from tests.tracing import trace_program
from vmmtui.model.ledger import Ledger
from vmmtui.stream.observed import FdsSent

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def shim(ebpf, tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build the fd log shim")
    lib = tmp_path_factory.mktemp("shim") / "fdlog.so"
    src = FIXTURES / "fdlog_shim.c"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(lib), str(src), "-ldl"], check=True)
    return lib


def shim_truth(out: Path) -> tuple[dict[tuple[int, int], tuple[int, int, int]], int]:
    """(receiver pid, fd) → (sender pid, fd, sending socket's inode), from the shim's log alone:
    per socketpair, in the order sent. A message is queued after its send began and taken before
    its receive returned, so sends are ordered by their start and receives by their end. Also
    how many receives were on sockets no logged socketpair made (not judged)."""
    peer: dict[int, int] = {}
    calls = []
    for path in out.glob("fdlog.*"):
        pid = int(path.suffix[1:])
        for line in path.read_text().splitlines():
            kind, *rest = line.split()
            if kind == "pair":
                a, b = int(rest[0]), int(rest[1])
                peer[a], peer[b] = b, a
            else:
                calls.append((int(rest[0]), kind, pid, int(rest[1]), [int(x) for x in rest[2:]]))
    queues: dict[int, deque] = defaultdict(deque)
    truth, unknown = {}, 0
    for _, kind, pid, ino, fds in sorted(calls):
        if kind == "send":
            queues[ino].append((pid, ino, fds))
        elif ino not in peer or not queues[peer[ino]]:
            unknown += 1
        else:
            sender, sock, sent = queues[peer[ino]].popleft()
            for got, fd in zip(fds, sent, strict=False):
                truth[(pid, got)] = (sender, fd, sock)
    return truth, unknown


def traced(tmp_path: Path, shim: Path, *args: str) -> tuple[dict, dict, int]:
    program = FIXTURES / "real_run.py"
    _, _, events = trace_program(tmp_path, program, str(tmp_path), str(shim), *args, timeout=300)
    # the ledger's matches, folded from the recording: each names its send by the sender's pid,
    # fd and the send's time, which finds the send's record and so its socket
    ledger = Ledger()
    for e in events:
        ledger.apply(e)
    sock = {
        (e.pid, e.ktime, fd): e.sock.ino for e in events if isinstance(e, FdsSent) for fd in e.fds
    }
    said = {
        (t.to_pid, t.to_fd): (
            t.from_pid,
            t.from_fd,
            sock.get((t.from_pid, t.sent_at, t.from_fd), 0),
        )
        for t in ledger.transfers
        if t.how == "SCM_RIGHTS"
    }
    return *shim_truth(tmp_path), said


def assert_each_send_as_the_programs_logged_it(truth: dict, said: dict) -> None:
    wrong = {k: (said.get(k), v) for k, v in truth.items() if said.get(k) != v}
    assert not wrong, (
        f"{len(wrong)} of {len(truth)} receives name another send than the programs logged "
        f"(trace, log): {list(wrong.items())[:4]}"
    )


def test_nginx_workers_channels_each_name_their_send(tmp_path, shim):
    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed (apt-get install nginx)")
    truth, unknown, said = traced(tmp_path, shim, "nginx", "8")
    assert (len(truth), unknown) == (28, 0)  # 0 + 1 + ... + 7 channels for earlier workers
    assert_each_send_as_the_programs_logged_it(truth, said)


def test_chromium_headless_receives_each_name_their_send(tmp_path, shim):
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("chromium is not installed (apt-get install chromium)")
    truth, unknown, said = traced(tmp_path, shim, "chromium")
    assert len(truth) > 10 and unknown < len(truth), (len(truth), unknown)
    assert_each_send_as_the_programs_logged_it(truth, said)
