"""The trace's text as a newcomer reads it: the count of findings agrees with the findings just
printed, the close of a pidfd is shown, a wrapper's processes (a shell, a pyenv shim) are counted
instead of printed, losses are said with their window, and a trace stopped by a signal exits
128 + it (130 on Ctrl-C)."""

import io
import signal
import subprocess
import sys
import threading
import time

import pytest
from rich.console import Console

from vmmtui.model.ledger import Ledger
from vmmtui.stream.observed import (
    FdCloseCall,
    FdsReceived,
    FdsSent,
    LedgerFinding,
    MemfdCreated,
    MemoryMapped,
    MemoryUnmapped,
    PidfdOpened,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    SocketEnd,
    TraceFinished,
    TraceLost,
    TraceStarted,
)
from vmmtui.words.trace import Bystanders, lines, worth_a_line

SOCK = SocketEnd(100, 101, "@vmm")
T0 = 1_000_000_000


def text(events) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    for e in events:
        for line in lines(e, T0):
            console.print(line)
    return console.export_text()


def test_a_wrappers_processes_are_counted_and_the_program_that_shares_is_shown():
    b = Bystanders()
    shown = []
    for e in [
        TraceStarted("ebpf", [10], ["python3"], ktime0=T0),
        ProcessExec(10, 10, T0 + 1, "/root/.pyenv/shims/python3", "python3"),
        ProcessExec(10, 10, T0 + 2, "/usr/bin/bash", "bash"),
        ProcessForked(10, 10, T0 + 3, 11, "bash"),
        ProcessExec(11, 11, T0 + 4, "/usr/bin/readlink", "readlink"),
        ProcessExit(11, 11, T0 + 5, 256, "readlink"),
        ProcessExec(10, 10, T0 + 6, "/usr/bin/python3.11", "python3"),
        MemfdCreated(10, 10, T0 + 7, "x", 5, "f1"),
        ProcessForked(10, 10, T0 + 8, 12, "python3"),
        FdsReceived(12, 12, T0 + 9, "recvmsg", SOCK, [6], ["f1"], 1),
        ProcessExit(12, 12, T0 + 10, 0),
    ]:
        shown += b.see(e)
    words = [
        type(e).__name__ + ":" + str(getattr(e, "filename", getattr(e, "child", ""))) for e in shown
    ]
    assert words == [
        "TraceStarted:",
        "ProcessExec:/usr/bin/python3.11",  # the program it runs: the shim's execs left out
        "MemfdCreated:",
        "ProcessForked:12",  # the fork of a process that shares: shown before its first call
        "FdsReceived:",
        "ProcessExit:",
    ]
    assert b.hidden == 1 and "1 process only forked, ran a program and exited" in b.words()


def test_the_command_itself_is_shown_though_it_shares_nothing():
    b = Bystanders()
    shown = []
    for e in [
        TraceStarted("ebpf", [10], ["true"], ktime0=T0),
        ProcessExec(10, 10, T0 + 1, "/usr/bin/true", "true"),
        ProcessExit(10, 10, T0 + 2, 0),
    ]:
        shown += b.see(e)
    assert [type(e).__name__ for e in shown] == ["TraceStarted", "ProcessExec", "ProcessExit"]


def test_the_close_of_a_pidfd_is_worth_a_line():
    ledger = Ledger()
    ledger.apply(PidfdOpened(10, 10, T0 + 1, 20, 6))
    assert worth_a_line(FdCloseCall(10, 10, T0 + 2, 6, "p1", 0), ledger)
    assert not worth_a_line(FdCloseCall(10, 10, T0 + 2, 7, "", 0), ledger)  # a file of no share


def test_a_loss_and_an_unknown_say_how_many_records_and_between_when():
    out = text(
        [
            TraceLost(812, T0 + 30_000_000, 1, T0 + 5_000_000, T0 + 30_000_000),
            LedgerFinding(
                "unknown",
                20,
                ktime=T0 + 40_000_000,
                fd=7,
                how="received",
                was="fd-never-closed",
                lost=812,
                lost_first_ns=T0 + 5_000_000,
                lost_last_ns=T0 + 30_000_000,
            ),
        ]
    )
    assert "812 records lost between 0.0050 s and 0.0300 s on CPU 1" in out
    assert "? unknown: 812 records lost between 0.0050 s and 0.0300 s: pid 20 fd 7" in out
    assert "leak" not in out.split("never as a leak")[1]


def test_fds_a_record_did_not_hold_are_said_and_counted():
    out = text(
        [FdsSent(10, 10, T0 + 1, "sendmsg", SOCK, [5] * 16, ["f1"] * 16, 1, fds_not_read=48)]
    )
    assert "(+48 more fds not read)" in out
    ledger = Ledger()
    ledger.apply(
        FdsSent(10, 10, T0 + 1, "sendmsg", SOCK, [5] * 16, ["f1"] * 16, 1, fds_not_read=48)
    )
    assert ledger.fds_not_read == {"sent": 48}


def test_the_count_at_the_end_counts_the_finding_just_printed():
    assert "1 finding;" in text([TraceFinished(["x"], 0, None, 5, 0, 0.1, 1)])


# -- live: real programs under the eBPF trace ----------------------------------------------------

SHARE = """
import array, os, socket
a, b = socket.socketpair()
fd = os.memfd_create("demo")
if os.fork() == 0:
    _, anc, _, _ = b.recvmsg(1, socket.CMSG_SPACE(4))
    os.close(array.array("i", anc[0][2])[0])
    os._exit(0)
a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
os.wait()
os.close(os.pidfd_open(os.getpid()))
"""


@pytest.mark.slow
def test_a_newcomers_trace_through_a_wrapper(ebpf, tmp_path):
    """A wrapper script (as a pyenv shim is) runs helpers, then the program that shares."""
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(
        f'#!/bin/sh\nv=$(basename "$0"); test -n "$(readlink -f /)"; exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--no-cuda", "--", str(wrapper), "-c", SHARE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "✓ shared:" in out and "1 finding;" in out, out
    assert "pidfd_open(" in out
    pidfd = out.split("pidfd_open(")[1].split("→ pidfd ")[1].split()[0]
    assert f"close({pidfd})" in out, out  # the pidfd's close is shown
    assert "basename" not in out and "readlink" not in out, out  # the wrapper's helpers: counted
    assert "only forked, ran a program and exited" in out


def stop_with(args: list[str], sig: int) -> int:
    p = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "trace", "--no-cuda", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert p.stdout is not None
    assert "vmmtui trace: eBPF" in p.stdout.readline()  # the trace runs
    # read what it prints, as a terminal does: with --all on a busy machine the findings fill a
    # pipe nobody reads, and the trace then waits in its write, not on the signal
    threading.Thread(target=p.stdout.read, daemon=True).start()
    time.sleep(0.5)
    p.send_signal(sig)
    try:
        return p.wait(timeout=30)
    finally:
        p.kill()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.serial  # traces every process (--all)
def test_trace_all_stopped_by_a_signal_exits_128_plus_it(ebpf, sig):
    assert stop_with(["--all", "-q"], sig) == 128 + sig


@pytest.mark.slow
def test_trace_of_a_command_stopped_by_ctrl_c_exits_130(ebpf):
    assert stop_with(["--", "sleep", "30"], signal.SIGINT) == 130


def test_the_summary_says_losses_per_cpu_the_fds_not_read_and_the_sends_not_seen_received():
    from vmmtui.cli.trace import _summary

    ledger = Ledger()
    for e in [
        FdsSent(10, 10, T0 + 1, "sendmsg", SOCK, [5] * 16, ["f1"] * 16, 1, fds_not_read=48),
        FdsReceived(11, 11, T0 + 2, "recvmsg", SOCK, [6] * 16, ["f1"] * 16, 1, fds_not_read=48),
        FdsSent(10, 10, T0 + 3, "sendmsg", SOCK, [7], ["f2"], 1),
        TraceLost(5, T0 + 9_000_000, 0, T0 + 4_000_000, T0 + 9_000_000),
        TraceLost(2, T0 + 9_000_000, 1, T0 + 4_000_000, T0 + 9_000_000),
    ]:
        ledger.apply(e)
    ledger.finish()
    console = Console(width=400, record=True, file=io.StringIO())
    _summary(console, ledger, T0)
    out = console.export_text()
    assert (
        "lost: 7 records (5 on CPU 0, 2 on CPU 1): 7 records lost between 0.0040 s and 0.0090 s"
        in out
    )
    assert "1 conclusion they could overturn said as unknown, none as a leak" in out
    assert "48 more fds not read (sent) and 48 more fds not read (received)" in out
    assert "16 shared" in out and "1 unknown" in out


def test_the_commands_program_comes_before_a_later_line_of_another_process():
    """The command's exec waited for its exit, so another process's exit at 3.15 s was printed
    before the command's exec at 0.14 s: now the text keeps the kernel's order."""
    b = Bystanders()
    shown = []
    for e in [
        TraceStarted("ebpf", [10], ["python3"], ktime0=T0),
        ProcessExec(10, 10, T0 + 1, "/usr/bin/python3.11", "python3"),
        ProcessForked(10, 10, T0 + 2, 12, "python3"),
        FdsReceived(12, 12, T0 + 3, "recvmsg", SOCK, [6], ["f1"], 1),
        ProcessExit(12, 12, T0 + 4, 0),
        ProcessExit(10, 10, T0 + 5, 0),
    ]:
        shown += b.see(e)
    stamps = [e.ktime for e in shown if hasattr(e, "ktime")]
    assert stamps == sorted(stamps) and len(stamps) == 5, shown


def test_a_worker_sending_an_fd_to_itself_is_said_to_be_the_rehearsal():
    """The demo's first kernel lines show the producer sending an fd to itself (its rehearsal of
    the send, on a socketpair of its own, at step 1): said so, not left to read as the share."""
    from vmmtui.stream.observed import FdsReceived, SocketEnd
    from vmmtui.view.kernel import KernelFact, Source
    from vmmtui.words.trace import kernel_fact

    sock = SocketEnd(1, 2, "")
    own = KernelFact(
        "producer",
        FdsReceived(7, 7, 1, "recvmsg", sock, [7], ["f"], 1),
        (Source("producer", 7, 6, "sendmsg"),),
    )
    assert "rehearsal" in kernel_fact(own).plain
    peer = KernelFact(
        "consumer",
        FdsReceived(8, 8, 1, "recvmsg", sock, [5], ["f"], 1),
        (Source("producer", 7, 5, "sendmsg"),),
    )
    assert "rehearsal" not in kernel_fact(peer).plain


def test_a_mapping_its_unmaps_and_an_execs_closes_are_worded():
    """mmap of a file of interest, the unmaps that touch it, and the fds an exec closed: one line
    each, the file's name from the kernel passed through the sanitiser."""
    said = text(
        [
            MemoryMapped(
                7, 7, T0 + 1, 5, "a1", 0x7F00_0000, 1 << 20, 0, 3, 1, 0, "/dev/shm/x\x1b[2J"
            ),
            MemoryMapped(7, 7, T0 + 2, 6, "b2", 0, 1 << 20, -12, 3, 2, 0, "memfd:pin"),
            MemoryUnmapped(7, 7, T0 + 3, 0x7F00_0000, 1 << 20),
            MemoryUnmapped(7, 7, T0 + 4, 0x7F00_0000, 1 << 20, 0, "mremap", 0x7E00_0000, 4 << 20),
            MemoryUnmapped(7, 7, T0 + 5, 0x7F00_0000, 4096, 0, "mmap"),
            FdCloseCall(7, 7, T0 + 6, 4, "c3", 0, call="exec"),
        ]
    )
    assert "mmap(fd 5 /dev/shm/x" in said and "[file a1], 1 MiB, shared) → 0x7f000000" in said
    assert "\x1b" not in said
    assert "mmap(fd 6 memfd:pin [file b2], 1 MiB, private) → -ENOMEM" in said
    assert "munmap(0x7f000000, 1 MiB) → 0" in said
    assert "mremap(0x7f000000, 1 MiB) → 0x7e000000, 4 MiB" in said
    assert "mmap(MAP_FIXED) over 0x7f000000, 4 KiB" in said
    assert "exec closed fd 4 [file c3] (close-on-exec)" in said
