"""How much ``vmmtui trace`` costs and how fast it speaks:

0. BPF time (kernel.bpf_stats_enabled=1, each program's run_time_ns / run_cnt), in one run on
   one kernel: an unrelated program's getppid() and close(-1) with no programs, with a trivial
   program on the same tracepoints (the floor: tp_btf and raw_tp), and with vmmtui's programs
   (and, with --before REV, the object of an earlier revision); then the BPF ns per traced call
   (enter + exit) while vmmtui follows a sharing loop, the machine's untraced runs taken out;
1. overhead: a program sharing and closing fds in a loop (memfd → SCM_RIGHTS → receive → close),
   untraced, with the BPF programs alone (records drained raw, nothing decoded: the kernel side)
   and traced by ``vmmtui trace``, alternated in the same run: the ratios of medians (target:
   within 5 %);
2. latency: each call's kernel time (CLOCK_MONOTONIC, in the record) to the moment its JSON line
   reaches a reader of ``vmmtui trace --json`` (target: under 100 ms);
3. the tracer's CPU (user + system, the vmmtui process alone) while the load makes about 1,000
   traced calls a second (target: under 5 % of one core);
4. the user side (``--user-only`` runs it with the BPF time alone): the tracer's CPU per traced
   call at 10,000 calls a second (``trace --json``, from its first call to its last: start-up
   apart; its ring reader's share and its context switches; with ``--spread``, again from a
   pinned sender-receiver pair per two CPUs, every CPU's ring in use), the calls lost, and the
   inspector's lag at 20,000 calls a second (scripts/trace-inspector-bench.py), for this
   checkout and, with ``--before-tree DIR``, an earlier one in the same run; ``summary`` puts the figures the targets name first.

Usage: python scripts/trace-bench.py [--out bench/results] [--rounds 5] [--shares 3000]
       [--before main] [--bpf-only] [--user-only] [--before-tree DIR] [--spread]
       [--note "what else ran"]
Needs root (eBPF). Results: bench/results/trace-<host>-<date>.json
"""

import argparse
import array
import ctypes
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the checkout whose vmmtui is measured in this process (``--stages --before-tree``: an older one)
sys.path.insert(0, os.environ.get("VMMTUI_BENCH_TREE") or str(ROOT))


def load(shares: int, per_second: float, pairs: int = 0) -> None:
    """The measured program: share a memfd ``shares`` times (0 per_second: as fast as it can).
    ``pairs`` (1 or more): that many sender-receiver pairs share them between them, each process
    pinned to a CPU of its own in turn, so that the records come from every CPU's ring buffer (as
    on a many-CPU machine running many programs), not from the one or two the scheduler prefers;
    0: one pair, where the scheduler puts it."""
    if pairs <= 0:
        _pair(shares, per_second)
        return
    cpus = sorted(os.sched_getaffinity(0))
    kids = []
    for i in range(pairs):
        mine = shares // pairs + (1 if i < shares % pairs else 0)
        pid = os.fork()
        if pid == 0:
            try:
                os.sched_setaffinity(0, {cpus[(2 * i) % len(cpus)]})
                _pair(mine, per_second * mine / shares, cpus[(2 * i + 1) % len(cpus)])
            finally:
                os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)


def _pair(shares: int, per_second: float, receiver_cpu: int | None = None) -> None:
    """One sender (this process) and its receiver (a child, on ``receiver_cpu`` when given)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        a.close()
        if receiver_cpu is not None:
            os.sched_setaffinity(0, {receiver_cpu})
        while True:
            fds = array.array("i")
            data, anc, _, _ = b.recvmsg(1, socket.CMSG_LEN(4))
            if data == b"E":
                os._exit(0)
            for _, _, raw in anc:
                fds.frombytes(raw[:4])
            for fd in fds:
                os.close(fd)
    b.close()
    start = time.monotonic()
    for i in range(shares):
        fd = os.memfd_create("bench", 0)
        a.sendmsg([b"F"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
        os.close(fd)
        if per_second:
            ahead = start + (i + 1) / per_second - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    a.send(b"E")
    os.waitpid(pid, 0)


def run_load(
    shares: int,
    per_second: float = 0,
    traced: bool = False,
    json_out: bool = False,
    tree: Path = ROOT,
    pairs: int = 0,
):
    """The load, traced by the vmmtui of ``tree`` (a checkout: its ``python -m vmmtui``)."""
    cmd = [sys.executable, __file__, "--load", str(shares), str(per_second), str(pairs)]
    if traced:
        cmd = [
            sys.executable,
            "-m",
            "vmmtui",
            "trace",
            "--no-cuda",
            "--json" if json_out else "-q",
            "--",
            *cmd,
        ]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tree
    )


def wall_of_load(shares: int, traced: bool) -> float:
    """Seconds the load itself took (its own clock: the tracer's start-up is not the program's).
    Written to a file of its own: the tracer's lines share the terminal's stdout with the load."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        wall_file = Path(tmp) / "wall"
        env_cmd = [
            sys.executable,
            "-c",
            f"import time,runpy,sys; sys.argv=['x','--load','{shares}','0']; t=time.perf_counter(); "
            f"runpy.run_path({str(Path(__file__))!r}, run_name='__main__'); "
            f"open({str(wall_file)!r}, 'w').write(str(time.perf_counter()-t))",
        ]
        if traced:
            env_cmd = [sys.executable, "-m", "vmmtui", "trace", "--no-cuda", "-q", "--", *env_cmd]
        res = subprocess.run(env_cmd, capture_output=True, text=True, cwd=ROOT, timeout=600)
        if not wall_file.exists():
            sys.exit(
                f"the load did not run ({'traced' if traced else 'untraced'}): {res.stderr[-500:]}"
            )
        return float(wall_file.read_text())


def wall_of_load_kernel_only(shares: int) -> tuple[float, int]:
    """The load with the BPF programs loaded and its records drained raw (libbpf's ring buffer read,
    nothing decoded): the kernel side of the cost, apart from vmmtui's userspace decode and fold.
    Returns the load's own wall time and the records the kernel produced."""
    import tempfile

    from vmmtui.trace.loader import Probe

    probe = Probe()
    try:
        probe.attach_syscalls()
        probe.configure(False, os.getpid())
        with tempfile.TemporaryDirectory() as tmp:
            wall_file = Path(tmp) / "wall"
            code = (
                f"import time,runpy,sys; sys.stdin.read(1); sys.argv=['x','--load','{shares}','0']; "
                f"t=time.perf_counter(); runpy.run_path({str(Path(__file__))!r}, run_name='__main__'); "
                f"open({str(wall_file)!r}, 'w').write(str(time.perf_counter()-t))"
            )
            proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, cwd=ROOT)
            probe.follow(proc.pid)
            assert proc.stdin is not None
            proc.stdin.write(b"g")
            proc.stdin.close()
            records = 0
            while proc.poll() is None:
                records += len(probe.poll(25))
            records += len(probe.poll(0))
            return float(wall_file.read_text()), records
    finally:
        probe.close()


def latency_and_cpu(per_second: float, seconds: float, tree: Path = ROOT, pairs: int = 0) -> dict:
    """Event-to-line latency and the tracer's CPU under a steady load. The CPU is read (psutil)
    at the first and the last traced call: that is the cost per call. The tracer's start-up (the
    imports, and the kernel's verifier run on the load of the object, charged to the tracer) is
    a fixed cost, said apart (``startup_cpu_s``): over an 8 s run it alone is 5-20 % of a core.
    Between the same two reads: the ring buffer reader's share of the CPU (its threads apart from
    the main one), the kernel's share (system time), and the tracer's context switches (voluntary: its waits; involuntary: taken
    off a CPU). ``pairs``: see ``load``."""
    import psutil

    proc = run_load(
        int(per_second * seconds), per_second, traced=True, json_out=True, tree=tree, pairs=pairs
    )
    tracer = psutil.Process(proc.pid)
    marks: dict[str, tuple[float, float, int, int, float]] = {}

    def cpu_now(mark: str = "") -> float:
        try:
            t = tracer.cpu_times()
            if mark:
                others = sum(
                    x.user_time + x.system_time for x in tracer.threads() if x.id != proc.pid
                )
                ctx = tracer.num_ctx_switches()
                marks[mark] = (t.user + t.system, others, ctx.voluntary, ctx.involuntary, t.system)
            return t.user + t.system
        except psutil.Error:
            return float("nan")

    lat: list[float] = []
    calls = 0
    first: tuple[int, float] | None = None
    last: tuple[int, float, int] | None = None
    whole = {"t": 0.0}
    lost = None

    def sample() -> None:
        while proc.poll() is None:
            c = cpu_now()
            if c == c:
                whole["t"] = c
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.monotonic_ns()
        e = json.loads(line)
        if e.get("event") == "TraceFinished":
            lost = e.get("lost")
        if "ktime" in e and e.get("event") in (
            "FdsSent",
            "FdsReceived",
            "FdCloseCall",
            "MemfdCreated",
        ):
            calls += 1
            lat.append((now - e["ktime"]) / 1e6)
            if first is None:
                first = (now, cpu_now("first"))
            elif calls % 100 == 0:  # psutil's read is not free: every 100th call
                last = (now, cpu_now("last"), calls - 1)
    proc.wait()
    lat.sort()
    out = {
        "tree": str(tree),
        "load_shares_per_s": per_second,
        "calls_made": int(per_second * seconds) * 5,
        "traced_calls": calls,
        "lost": lost,
        "latency_ms_median": round(statistics.median(lat), 2),
        "latency_ms_p99": round(lat[int(len(lat) * 0.99) - 1], 2),
        "latency_ms_max": round(lat[-1], 2),
    }
    if first is not None and last is not None:
        span = (last[0] - first[0]) / 1e9
        cpu = last[1] - first[1]
        out.update(
            traced_calls_per_s=round(last[2] / span, 1),
            span_s=round(span, 2),
            tracer_cpu_s=round(cpu, 3),
            tracer_cpu_percent_of_a_core=round(100 * cpu / span, 2),
            tracer_cpu_us_per_call=round(1e6 * cpu / last[2], 1),
            startup_cpu_s=round(first[1], 3),
            whole_life_cpu_s=round(whole["t"], 3),
        )
        if "first" in marks and "last" in marks:
            a, b = marks["first"], marks["last"]
            out.update(
                reader_thread_cpu_s=round(b[1] - a[1], 3),
                system_cpu_s=round(b[4] - a[4], 3),
                voluntary_switches_per_s=round((b[2] - a[2]) / span, 1),
                involuntary_switches_per_s=round((b[3] - a[3]) / span, 1),
            )
    out["pairs"] = pairs
    return out


# -- BPF time, with kernel.bpf_stats_enabled=1 --------------------------------------------------

STATS = Path("/proc/sys/kernel/bpf_stats_enabled")
#: mov64 r0, 0; exit: the trivial program (the floor: what any program on the same hook costs)
TRIVIAL = bytes.fromhex("b7000000000000009500000000000000")
PROG_TYPE_TRACING, PROG_TYPE_RAW_TRACEPOINT, TRACE_RAW_TP = 26, 17, 23


class _LoadOpts(ctypes.Structure):
    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("attempts", ctypes.c_int),
        ("expected_attach_type", ctypes.c_int),
        ("prog_btf_fd", ctypes.c_uint32),
        ("prog_flags", ctypes.c_uint32),
        ("prog_ifindex", ctypes.c_uint32),
        ("kern_version", ctypes.c_uint32),
        ("attach_btf_id", ctypes.c_uint32),
        ("attach_prog_fd", ctypes.c_uint32),
        ("attach_btf_obj_fd", ctypes.c_uint32),
    ]


def prog_stats(fd: int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of a loaded program, from its fd's fdinfo."""
    info = dict(
        line.split(":\t", 1)
        for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines()
        if ":\t" in line
    )
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


class Trivial:
    """The floor: programs that return at once, on sys_enter and sys_exit, of the given flavour
    (tp_btf: BTF-typed raw tracepoints, as vmmtui's; raw_tp: plain raw tracepoints)."""

    def __init__(self, flavour: str) -> None:
        from vmmtui.trace.loader import libbpf_path

        lib = ctypes.CDLL(libbpf_path(), use_errno=True)
        lib.bpf_prog_load.restype = ctypes.c_int
        lib.bpf_prog_load.argtypes = [
            ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t,
            ctypes.c_void_p,
        ]  # fmt: skip
        lib.bpf_raw_tracepoint_open.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.libbpf_find_vmlinux_btf_id.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.fds: list[int] = []
        self.links: list[int] = []
        for tp in ("sys_enter", "sys_exit"):
            opts = _LoadOpts(ctypes.sizeof(_LoadOpts))
            if flavour == "tp_btf":
                opts.expected_attach_type = TRACE_RAW_TP
                opts.attach_btf_id = lib.libbpf_find_vmlinux_btf_id(tp.encode(), TRACE_RAW_TP)
                kind = PROG_TYPE_TRACING
            else:
                kind = PROG_TYPE_RAW_TRACEPOINT
            fd = lib.bpf_prog_load(
                kind, b"floor", b"GPL", TRIVIAL, len(TRIVIAL) // 8, ctypes.byref(opts)
            )
            if fd < 0:
                self.close()
                raise OSError(-fd, f"the trivial {flavour} program: {os.strerror(-fd)}")
            self.fds.append(fd)
            link = lib.bpf_raw_tracepoint_open(None if flavour == "tp_btf" else tp.encode(), fd)
            if link < 0:
                self.close()
                raise OSError(
                    -link, f"attaching the trivial {flavour} program: {os.strerror(-link)}"
                )
            self.links.append(link)

    def stats(self) -> tuple[int, int]:
        runs = [prog_stats(fd) for fd in self.fds]
        return sum(r[0] for r in runs), sum(r[1] for r in runs)

    def close(self) -> None:
        for fd in self.links + self.fds:
            os.close(fd)
        self.links, self.fds = [], []


def vmmtui_stats(probe) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of vmmtui's sys_enter + sys_exit programs."""
    from vmmtui.trace.loader import FLAVOURS

    total = [0, 0]
    for name in FLAVOURS[probe.flavour][:2]:
        prog = probe.lib.bpf_object__find_program_by_name(probe.obj, name.encode())
        t, n = prog_stats(probe.lib.bpf_program__fd(prog))
        total[0] += t
        total[1] += n
    return total[0], total[1]


SYSCALL_LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
static double ns(struct timespec a, struct timespec b)
{ return (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec); }
int main(int argc, char **argv)
{
    long n = atol(argv[1]);
    struct timespec a, b;
    double best_getppid = 1e18, best_close = 1e18;
    for (int r = 0; r < 5; r++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) syscall(SYS_getppid);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (ns(a, b) / n < best_getppid) best_getppid = ns(a, b) / n;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++) syscall(SYS_close, -1);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (ns(a, b) / n < best_close) best_close = ns(a, b) / n;
    }
    printf("%.1f %.1f\n", best_getppid, best_close);
    return 0;
}
"""


def syscall_loop(tmp: Path) -> tuple[list[str], str]:
    """An unrelated program timing getppid() and close(-1): C when a compiler is here (the
    syscall alone), else Python (its interpreter's cost added alike to every configuration)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc:
        src, exe = tmp / "loop.c", tmp / "loop"
        src.write_text(SYSCALL_LOOP)
        if subprocess.run([cc, "-O2", "-o", str(exe), str(src)]).returncode == 0:
            return [str(exe)], "C"
    code = (
        "import os, sys, time\n"
        "n = int(sys.argv[1]); best = [1e18, 1e18]\n"
        "for _ in range(5):\n"
        "    t = time.perf_counter_ns()\n"
        "    for _ in range(n): os.getppid()\n"
        "    best[0] = min(best[0], (time.perf_counter_ns() - t) / n)\n"
        "    t = time.perf_counter_ns()\n"
        "    for _ in range(n):\n"
        "        try: os.close(-1)\n"
        "        except OSError: pass\n"
        "    best[1] = min(best[1], (time.perf_counter_ns() - t) / n)\n"
        "print(best[0], best[1])\n"
    )
    return [sys.executable, "-c", code], "python"


def untraced(loop: list[str], calls: int) -> dict:
    out = subprocess.run([*loop, str(calls)], capture_output=True, text=True, check=True).stdout
    g, c = (float(x) for x in out.split())
    return {"getppid_ns": round(g, 1), "close_minus1_ns": round(c, 1)}


def per_run(before: tuple[int, int], after: tuple[int, int]) -> float:
    runs = after[1] - before[1]
    return round((after[0] - before[0]) / runs, 1) if runs else 0.0


def traced_bpf_ns(probe, stats, shares: int) -> dict:
    """The sharing load followed by ``probe`` (records drained raw by a thread): BPF ns per
    traced call (enter + exit), the runs of untraced syscalls on the machine taken out at the
    cost they were measured at just before."""
    idle0 = stats()
    time.sleep(1.0)  # the machine's own syscalls, untraced: their cost per run
    idle1 = stats()
    untraced_run = (idle1[0] - idle0[0]) / max(idle1[1] - idle0[1], 1)
    code = (
        f"import runpy,sys; sys.stdin.read(1); sys.argv=['x','--load','{shares}','0']; "
        f"runpy.run_path({str(Path(__file__))!r}, run_name='__main__')"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, cwd=ROOT)
    probe.follow(proc.pid)
    records = [0]
    done = threading.Event()

    def drain() -> None:
        while not done.is_set():
            records[0] += len(probe.poll(25))
        records[0] += len(probe.poll(0))

    reader = threading.Thread(target=drain)
    reader.start()
    unrecorded = getattr(probe, "unrecorded", dict)  # an object without the counts: {}
    u0 = unrecorded()
    s0 = stats()
    assert proc.stdin is not None
    proc.stdin.write(b"g")
    proc.stdin.close()
    proc.wait()
    s1 = stats()
    done.set()
    reader.join()
    u1 = unrecorded()
    runs, spent = s1[1] - s0[1], s1[0] - s0[0]
    traced_calls = records[0]  # one record per traced call (memfd, send, close, recv, close)
    other = max(runs - 2 * traced_calls, 0)
    return {
        "records": traced_calls,
        "runs": runs,
        "untraced_ns_per_run": round(untraced_run, 1),
        "bpf_ns_per_traced_call": round((spent - other * untraced_run) / max(traced_calls, 1), 1),
        "bpf_ns_per_run_all": round(spent / max(runs, 1), 1),
        # the load's calls the kernel looked at and kept to itself (its start-up's closes, mmaps)
        "unrecorded": {k: u1[k] - u0.get(k, 0) for k in u1},
    }


def old_probe(rev: str, tmp: Path):
    """The object of an earlier revision (``git show REV:…``, or ``REV`` a tree's directory),
    loaded by this checkout's loader (the maps it reads are the same since the per-CPU rings).
    None when that revision has no such object."""
    from vmmtui.trace.loader import Probe

    tree = Path(rev) / "vmmtui" / "trace" / "bpf" / "trace.bpf.o"
    if tree.is_file():  # a tree (--before-tree's, or one carried where there is no git)
        path = tree
    else:
        blob = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:vmmtui/trace/bpf/trace.bpf.o"],
            capture_output=True,
        )
        if blob.returncode != 0:
            return None
        path = tmp / "before.bpf.o"
        path.write_bytes(blob.stdout)

    # the loader of this checkout loads the older object: they share the maps it reads (rings,
    # traced, config, lost, counts) since the per-CPU rings
    return Probe(path=path)


def bpf_time(shares: int, calls: int, before: str | None) -> dict:
    """Untraced tax and traced cost side by side, with kernel.bpf_stats_enabled=1, one run."""
    import tempfile

    from vmmtui.trace.loader import Probe

    was = STATS.read_text().strip()
    STATS.write_text("1")
    out: dict = {"bpf_stats_enabled_was": was}
    try:
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            loop, out["loop"] = syscall_loop(tmp)
            configs: dict[str, dict] = {}
            configs["no programs"] = untraced(loop, calls)
            for flavour in ("tp_btf", "raw_tp"):
                try:
                    floor = Trivial(flavour)
                except OSError as exc:
                    configs[f"trivial {flavour}"] = {"refused": str(exc)}
                    continue
                try:
                    s0 = floor.stats()
                    configs[f"trivial {flavour}"] = untraced(loop, calls)
                    configs[f"trivial {flavour}"]["bpf_ns_per_run"] = per_run(s0, floor.stats())
                finally:
                    floor.close()
            probes = [("vmmtui", lambda: Probe())]
            if before:
                probes.append((f"vmmtui {before}", lambda: old_probe(before, tmp)))
            for label, make in probes:
                try:
                    probe = make()
                except Exception as exc:  # a revision without the object, or refused
                    configs[label] = {"refused": str(exc)}
                    continue
                if probe is None:
                    continue
                try:
                    probe.attach_syscalls()
                    probe.configure(False, os.getpid())
                    s0 = vmmtui_stats(probe)
                    row = untraced(loop, calls)
                    row["bpf_ns_per_run"] = per_run(s0, vmmtui_stats(probe))
                    row["flavour"] = probe.flavour
                    row["traced"] = traced_bpf_ns(probe, lambda p=probe: vmmtui_stats(p), shares)
                    configs[label] = row
                finally:
                    probe.close()
            out["configs"] = configs
            base = configs["no programs"]
            floor_row = configs.get("trivial tp_btf", {})
            for row in configs.values():
                if "getppid_ns" not in row:
                    continue
                row["getppid_vs_none"] = round(row["getppid_ns"] / base["getppid_ns"], 3)
                row["close_vs_none"] = round(row["close_minus1_ns"] / base["close_minus1_ns"], 3)
                if "getppid_ns" in floor_row:
                    row["getppid_vs_floor"] = round(row["getppid_ns"] / floor_row["getppid_ns"], 3)
                    row["close_vs_floor"] = round(
                        row["close_minus1_ns"] / floor_row["close_minus1_ns"], 3
                    )
    finally:
        STATS.write_text(was)
    return out


def lossless(per_second: int, seconds: float, ring_mb: int) -> dict:
    """``vmmtui trace --json`` of memfds shared at ``per_second`` for ``seconds`` (a receiver
    takes every one): the fds the stream shows sent and received, and the records lost."""
    fixture = ROOT / "tests" / "fixtures" / "trace_share.py"
    n = int(per_second * seconds)
    cmd = [
        sys.executable,
        "-m",
        "vmmtui",
        "trace",
        "--no-cuda",
        "--json",
        "--ring-mb",
        str(ring_mb),
    ]
    proc = subprocess.Popen(
        [*cmd, "--", sys.executable, str(fixture), "memfds", str(n), str(per_second)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    out = {"asked_per_s": per_second, "shares": n, "sent": 0, "received": 0, "loss_windows": 0}
    for line in proc.stdout:
        e = json.loads(line)
        if e["event"] == "FdsSent" and e["result"] >= 0:
            out["sent"] += len(e["fds"])
        elif e["event"] == "FdsReceived":
            out["received"] += len(e["fds"])
        elif e["event"] == "TraceLost":
            out["loss_windows"] += 1
        elif e["event"] == "TraceFinished":
            out["lost"] = e["lost"]
    for line in proc.stderr.read().splitlines():
        if line.startswith("TRUTH "):
            t = json.loads(line[6:])
            if t["op"] == "sent":
                out["load_seconds"] = t["seconds"]
    out["returncode"] = proc.wait()
    return out


def inspector_lag(rate: float, calls: int, tree: Path = ROOT) -> dict:
    """The inspector (the real TraceApp, headless) fed ``calls`` calls at ``rate`` a second by
    ``tree``'s scripts/trace-inspector-bench.py: how long after the last call the screen shows
    it, the repaints a second, and that no call was dropped."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "inspector.json"
        cmd = [
            sys.executable,
            str(tree / "scripts" / "trace-inspector-bench.py"),
            "--calls",
            "2000",
            "--samples",
            "5",
            "--live-calls",
            str(calls),
            "--rate",
            str(rate),
            "--json",
            str(out),
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, timeout=900)
        if not out.exists():
            return {"tree": str(tree), "failed": res.stderr[-500:]}
        return {"tree": str(tree), **json.loads(out.read_text())["live"]}


def user_side(before_tree: Path | None, seconds: float, spread: bool = False) -> dict:
    """The tracer's CPU a traced call at 10,000 calls a second, and the inspector's lag at 20,000,
    for this checkout and (``before_tree``) an earlier one, alternated in the same run; with
    ``spread``, the 10,000 calls a second again from a sender-receiver pair per two CPUs, each
    process on a CPU of its own (every CPU's ring buffer in use)."""
    trees = [ROOT] + ([before_tree] if before_tree else [])
    out: dict = {"rings": rings_here(), "at_10000_calls_per_s": [],
                 "inspector_at_20000_calls_per_s": []}  # fmt: skip
    pairs = max(len(os.sched_getaffinity(0)) // 2, 1)
    if spread:
        out["at_10000_calls_per_s_spread"] = []
    for tree in trees:
        out["at_10000_calls_per_s"].append(latency_and_cpu(2000, seconds, tree))
        if spread:
            out["at_10000_calls_per_s_spread"].append(latency_and_cpu(2000, seconds, tree, pairs))
        out["inspector_at_20000_calls_per_s"].append(
            inspector_lag(20_000, int(20_000 * seconds), tree)
        )
    return out


#: the stages of the tracer, each the functions whose CPU (their thread's: ``thread_time``) it is
STAGES = {
    "ring_read": [("vmmtui.trace.loader", "Probe", "poll")],
    "decode": [("vmmtui.trace.records", "Decoder", "batch")],
    "order": [
        ("vmmtui.trace.order", "KernelOrder", "extend"),
        ("vmmtui.trace.order", "KernelOrder", "release"),
        ("vmmtui.trace.order", "KernelOrder", "flush"),
    ],
    "fold": [("vmmtui.model.ledger", "Ledger", "apply")],
    "findings": [("vmmtui.model.refcounts", "Refcounts", "fold")],
    "json": [("vmmtui.words.findings", None, "json_line")],
    "sinks": [
        ("vmmtui.record.writer", "Recorder", "write"),
        ("vmmtui.record.recording", "Recorder", "write"),  # where an older tree has it
    ],
}


def stages(per_second: float, seconds: float) -> dict:
    """Where the tracer's CPU goes, stage by stage, in this process: the load traced as
    ``trace --json --record`` traces it (the stream's JSON lines to /dev/null, a compressed
    recording), each stage's functions wrapped to add up their thread's CPU time. ``other``: the
    rest of the tracer's process CPU (the loop, its generators, the ledger's callers, the
    wrappers themselves: about 0.1 µs a wrapped call). A stage called inside another (the
    recording's JSON inside its sink) is charged to itself alone. Per traced call, in µs."""
    import importlib
    import tempfile

    acc = dict.fromkeys(STAGES, 0)
    undo = []
    #: per thread, the CPU of the stages called inside the one running (charged to theirs only)
    local = threading.local()
    for stage, places in STAGES.items():
        for module, cls, name in places:
            try:
                owner = importlib.import_module(module)
                if cls is not None:
                    owner = getattr(owner, cls)
                f = getattr(owner, name)
            except (ImportError, AttributeError):
                continue  # not in this tree (an older one)
            if getattr(f, "_stage", None):
                continue  # the same function under two names: wrapped once

            def wrapped(*a, _f=f, _stage=stage, **k):
                stack = local.__dict__.setdefault("stack", [0])
                stack.append(0)
                t = time.thread_time_ns()
                try:
                    return _f(*a, **k)
                finally:
                    took = time.thread_time_ns() - t
                    inner = stack.pop()
                    acc[_stage] += took - inner
                    stack[-1] += took

            wrapped._stage = stage  # type: ignore[attr-defined]
            setattr(owner, name, wrapped)
            undo.append((owner, name, f))
    from vmmtui.pipeline.session import TraceRequest, TraceSession
    from vmmtui.record.recording import Header, Recorder
    from vmmtui.words import findings as words

    shares = int(per_second * seconds)
    cmd = (sys.executable, __file__, "--load", str(shares), str(per_second), "0")
    try:
        with tempfile.TemporaryDirectory() as tmp, open(os.devnull, "w") as sink:
            rec = Recorder(Path(tmp) / "r.jsonl.gz", Header(backend="trace"), words.json_line)
            source, _ = TraceRequest(command=cmd, cuda=False, nvml=False).start()
            session = TraceSession(source, [rec.write])
            lines: list[str] = []

            def flush() -> None:
                sink.write("\n".join(lines))
                lines.clear()

            cpu0, events = time.process_time_ns(), 0
            for e in session.events(on_batch=flush):
                lines.append(words.json_line(e))
                events += 1
            flush()
            rec.close()
            cpu = time.process_time_ns() - cpu0
            calls = max(getattr(source, "count", 0), 1)
            lost = getattr(source, "lost", 0)
    finally:
        for owner, name, f in reversed(undo):
            setattr(owner, name, f)
    us = {k: round(v / calls / 1000, 2) for k, v in acc.items()}
    us["other"] = round((cpu - sum(acc.values())) / calls / 1000, 2)
    return {
        "calls_per_s_asked": per_second * 5,  # memfd_create, sendmsg, close, recvmsg, close
        "traced_calls": calls,
        "events": events,
        "lost": lost,
        "cpu_us_per_call": round(cpu / calls / 1000, 2),
        "us_per_call_by_stage": us,
    }


def stages_compared(before_tree: Path | None, seconds: float, rounds: int) -> dict:
    """``stages`` for this checkout and (``before_tree``) an earlier one, each in a process of its
    own, alternated ``rounds`` times (the machine's load drifts alike for both): the medians, and
    this checkout's over the earlier one's."""
    trees = {"this": ROOT, **({"before": before_tree} if before_tree else {})}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for _ in range(rounds):
        for key, tree in trees.items():
            env = {**os.environ, "VMMTUI_BENCH_TREE": str(tree)}
            cmd = [sys.executable, __file__, "--stages-here", str(seconds)]
            out = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=True)
            runs[key].append(json.loads(out.stdout))
    result: dict = {"rounds": rounds, "seconds": seconds, "runs": runs, "median": {}}
    for key, rs in runs.items():
        stage_names = rs[0]["us_per_call_by_stage"]
        result["median"][key] = {
            "cpu_us_per_call": statistics.median(r["cpu_us_per_call"] for r in rs),
            "lost": max(r["lost"] for r in rs),
            **{s: statistics.median(r["us_per_call_by_stage"][s] for r in rs) for s in stage_names},
        }
    if before_tree:
        this, before = result["median"]["this"], result["median"]["before"]
        result["this_over_before"] = {
            k: round(this[k] / before[k], 3) for k in this if k != "lost" and before.get(k)
        }
    return result


def rings_here() -> dict:
    """The ring buffers this checkout's tracer makes here: one per possible CPU (the kernel's
    list, which may name more CPUs than are online), each of ``ring_per_cpu`` bytes."""
    from vmmtui.trace.loader import RING_BYTES, ring_per_cpu

    try:
        possible = Path("/sys/devices/system/cpu/possible").read_text().strip()
    except OSError:
        possible = ""
    n = 0
    for part in possible.split(","):
        lo, _, hi = part.partition("-")
        if lo.isdigit():
            n += int(hi or lo) - int(lo) + 1
    return {
        "possible_cpus": possible,
        "rings": n,
        "online_cpus": os.cpu_count(),
        "ring_bytes_each": ring_per_cpu(RING_BYTES, n) if n else None,
    }


def summary(result: dict) -> dict:
    """The figures the targets name, one line each, from the parts of the result."""
    out: dict = {}
    for row in result.get("user_side", {}).get("at_10000_calls_per_s", []):
        out[f"tracer_us_cpu_per_call@{row['tree']}"] = row.get("tracer_cpu_us_per_call")
        out[f"tracer_percent_of_a_core@{row['tree']}"] = row.get("tracer_cpu_percent_of_a_core")
        out[f"lost@{row['tree']}"] = row.get("lost")
        out[f"calls_seen_of_made@{row['tree']}"] = f"{row['traced_calls']}/{row['calls_made']}"
    for row in result.get("user_side", {}).get("at_10000_calls_per_s_spread", []):
        out[f"spread_over_cpus_tracer_us_cpu_per_call@{row['tree']}"] = row.get(
            "tracer_cpu_us_per_call"
        )
        out[f"spread_over_cpus_lost@{row['tree']}"] = row.get("lost")
    for row in result.get("user_side", {}).get("inspector_at_20000_calls_per_s", []):
        out[f"inspector_lag_s@{row['tree']}"] = row.get("lag_after_last_call_s")
        out[f"inspector_repaints_per_s@{row['tree']}"] = row.get("repaints_per_s")
    configs = result.get("bpf_time", {}).get("configs", {})
    traced = configs.get("vmmtui", {}).get("traced", {})
    if traced:
        out["bpf_ns_per_traced_call"] = traced
    floor = configs.get("trivial tp_btf", {}).get("bpf_ns_per_run")
    if floor is not None:
        out["bpf_ns_trivial_program_floor"] = floor
    return out


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "--stages-here":
        print(json.dumps(stages(2000, float(sys.argv[2]))))
        return
    if len(sys.argv) >= 2 and sys.argv[1] == "--load":
        load(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        return
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--shares", type=int, default=3000)
    p.add_argument(
        "--note", default="", help="what else ran on the machine (saved with the result)"
    )
    p.add_argument("--calls", type=int, default=2_000_000, help="syscalls per untraced timing")
    p.add_argument(
        "--before",
        default="",
        help="also measure the BPF object of this git revision (e.g. main), or of the tree at this "
        "path (DIR/vmmtui/trace/bpf/trace.bpf.o), in the same run",
    )
    p.add_argument("--bpf-only", action="store_true", help="only the bpf_stats part")
    p.add_argument(
        "--user-only",
        action="store_true",
        help="only the user side: the tracer's CPU at 10,000 calls/s, the inspector's lag at "
        "20,000 (with --before-tree, for both) and the BPF time",
    )
    p.add_argument(
        "--before-tree",
        metavar="DIR",
        help="a checkout of an earlier revision (git archive REV | tar -x -C DIR): its tracer "
        "and inspector measured in the same run",
    )
    p.add_argument(
        "--lossless",
        type=int,
        metavar="RATE",
        help="only: share RATE memfds a second for --seconds under trace --json; exit 1 if any "
        "record was lost or any share is missing",
    )
    p.add_argument(
        "--spread",
        action="store_true",
        help="with --user-only: the 10,000 calls a second also from a sender-receiver pair per "
        "two CPUs, each process pinned to its own CPU (every CPU's ring buffer in use)",
    )
    p.add_argument(
        "--stages",
        action="store_true",
        help="only: where the tracer's CPU goes, stage by stage (ring read, decode, order, fold, "
        "findings, JSON, sinks), at 10,000 calls a second for --seconds, --rounds times (with "
        "--before-tree, alternated with that checkout's, and the ratios)",
    )
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--ring-mb", type=int, default=64)
    args = p.parse_args()
    if args.lossless:
        res = lossless(args.lossless, args.seconds, args.ring_mb)
        print(json.dumps(res, indent=2))
        ok = res.get("lost") == 0 and res["sent"] == res["received"] == res["shares"]
        sys.exit(0 if ok and res["returncode"] == 0 else 1)
    if args.stages:
        before = Path(args.before_tree).resolve() if args.before_tree else None
        print(json.dumps(stages_compared(before, args.seconds, args.rounds), indent=2))
        return
    from vmmtui.record.recording import Machine

    bpf = bpf_time(args.shares, args.calls, args.before or None)
    before_tree = Path(args.before_tree).resolve() if args.before_tree else None
    if args.user_only:
        result = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": Machine.here().__dict__,
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "loadavg_before": os.getloadavg(),
            "note": args.note,
            "bpf_time": bpf,
            "user_side": user_side(before_tree, args.seconds, args.spread),
            "loadavg_after": os.getloadavg(),
        }
        result = {"summary": summary(result), **result}
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        host = platform.node().split(".")[0] or "host"
        path = out / f"trace-user-side-{host}-{datetime.date.today().isoformat()}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result["summary"], indent=2))
        print(f"written {path}")
        return
    if args.bpf_only:
        result = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": Machine.here().__dict__,
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "note": args.note,
            "bpf_time": bpf,
        }
        print(json.dumps(result, indent=2))
        return

    untraced, kernel, traced = [], [], []
    records = 0
    for _ in range(args.rounds):  # alternated: the machine's load drifts alike for all three
        untraced.append(wall_of_load(args.shares, False))
        wall, records = wall_of_load_kernel_only(args.shares)
        kernel.append(wall)
        traced.append(wall_of_load(args.shares, True))
    u, t = statistics.median(untraced), statistics.median(traced)
    k = statistics.median(kernel)
    result = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "machine": Machine.here().__dict__,
        "cpus": os.cpu_count(),
        "loadavg_before": os.getloadavg(),
        "note": args.note,
        "kernel": platform.release(),
        "bpf_time": bpf,
        "overhead": {
            "shares": args.shares,
            "calls_per_share": 4,
            "untraced_s": [round(x, 4) for x in untraced],
            "traced_s": [round(x, 4) for x in traced],
            "untraced_median_s": round(u, 4),
            "traced_median_s": round(t, 4),
            "ratio": round(t / u, 4),
            "kernel_only_s": [round(x, 4) for x in kernel],
            "kernel_only_median_s": round(k, 4),
            "kernel_only_ratio": round(k / u, 4),
            "records_per_round": records,
            "per_share_us_untraced": round(u / args.shares * 1e6, 2),
            "per_share_us_traced": round(t / args.shares * 1e6, 2),
        },
        "at_about_1000_calls_per_s": latency_and_cpu(250, 8),
        "at_about_4000_calls_per_s": latency_and_cpu(1000, 5),
        "user_side": user_side(before_tree, min(args.seconds, 8)),
        "loadavg_after": os.getloadavg(),
    }
    result = {"summary": summary(result), **result}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    host = platform.node().split(".")[0] or "host"
    path = out / f"trace-{host}-{datetime.date.today().isoformat()}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written {path}")


if __name__ == "__main__":
    main()
