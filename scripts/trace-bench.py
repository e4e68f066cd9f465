"""How much ``vmmtui trace`` costs and how fast it speaks (issue 18's targets):

1. overhead: a program sharing and closing fds in a loop (memfd → SCM_RIGHTS → receive → close),
   untraced, with the BPF programs alone (records drained raw, nothing decoded: the kernel side)
   and traced by ``vmmtui trace``, alternated in the same run: the ratios of medians (target:
   within 5 %);
2. latency: each call's kernel time (CLOCK_MONOTONIC, in the record) to the moment its JSON line
   reaches a reader of ``vmmtui trace --json`` (target: under 100 ms);
3. the tracer's CPU (user + system, the vmmtui process alone) while the load makes about 1,000
   traced calls a second (target: under 5 % of one core).

Usage: python scripts/trace-bench.py [--out bench/results] [--rounds 5] [--shares 3000]
Needs root (eBPF). Results: bench/results/trace-<host>-<date>.json
"""

import argparse
import array
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def load(shares: int, per_second: float) -> None:
    """The measured program: share a memfd ``shares`` times (0 per_second: as fast as it can)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        a.close()
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


def run_load(shares: int, per_second: float = 0, traced: bool = False, json_out: bool = False):
    cmd = [sys.executable, __file__, "--load", str(shares), str(per_second)]
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
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT
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


def latency_and_cpu(per_second: float, seconds: float) -> dict:
    import psutil

    proc = run_load(int(per_second * seconds), per_second, traced=True, json_out=True)
    tracer = psutil.Process(proc.pid)
    lat: list[float] = []
    counts = {"calls": 0}
    cpu = {"t": 0.0}

    def sample() -> None:
        while proc.poll() is None:
            try:
                t = tracer.cpu_times()
                cpu["t"] = t.user + t.system
            except psutil.Error:
                return
            time.sleep(0.2)

    threading.Thread(target=sample, daemon=True).start()
    t_first = None
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.monotonic_ns()
        e = json.loads(line)
        if "ktime" in e and e.get("event") in (
            "FdsSent",
            "FdsReceived",
            "FdCloseCall",
            "MemfdCreated",
        ):
            counts["calls"] += 1
            lat.append((now - e["ktime"]) / 1e6)
            t_first = t_first or now
            t_last = now
    proc.wait()
    span = (t_last - t_first) / 1e9 if t_first else seconds
    lat.sort()
    return {
        "load_shares_per_s": per_second,
        "traced_calls": counts["calls"],
        "traced_calls_per_s": round(counts["calls"] / span, 1),
        "latency_ms_median": round(statistics.median(lat), 2),
        "latency_ms_p99": round(lat[int(len(lat) * 0.99) - 1], 2),
        "latency_ms_max": round(lat[-1], 2),
        "tracer_cpu_s": round(cpu["t"], 3),
        "tracer_cpu_percent_of_a_core": round(100 * cpu["t"] / span, 2),
        "span_s": round(span, 2),
    }


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "--load":
        load(int(sys.argv[2]), float(sys.argv[3]))
        return
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--shares", type=int, default=3000)
    p.add_argument(
        "--note", default="", help="what else ran on the machine (saved with the result)"
    )
    args = p.parse_args()
    from vmmtui.record.recording import Machine

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
        "loadavg_after": os.getloadavg(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    host = platform.node().split(".")[0] or "host"
    path = out / f"trace-{host}-{datetime.date.today().isoformat()}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"written {path}")


if __name__ == "__main__":
    main()
