"""How fast attach is: one full scan (proc + sock_diag + kcmp-sorted shares + lifecycle) of 100
processes holding 10 000 fds (tests/fixtures/many_fds.py), and the attach view's CPU at 4 Hz on that load.

Usage: python scripts/attach-bench.py [--procs 100] [--fds 10000] [--seconds 10] [--out bench/results]
Targets (issue 13): scan < 100 ms; the view at 4 Hz < 10 % of one core.
"""

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vmmtui.attach.follow import Follower  # noqa: E402
from vmmtui.attach.scan import scan  # noqa: E402
from vmmtui.attach.shares import find_shares  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=100)
    ap.add_argument("--fds", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = ap.parse_args()
    load = subprocess.Popen([sys.executable, str(ROOT / "tests/fixtures/many_fds.py"), str(args.procs), str(args.fds)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in load.stdout.readline().split()]
        time.sleep(1.0)
        fds = sum(len(os.listdir(f"/proc/{p}/fd")) for p in pids)
        scans, cold, shares_t, full = [], [], [], []
        s = None
        for _ in range(20):
            t = time.perf_counter()
            scan(pids)
            cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            s = scan(pids, prev=s)
            scans.append(time.perf_counter() - t)
            t = time.perf_counter()
            sh = find_shares(s)
            shares_t.append(time.perf_counter() - t)
        f = Follower(set(pids), use_nvml=False)
        f.poll()
        for _ in range(20):
            t = time.perf_counter()
            f.poll()
            full.append(time.perf_counter() - t)
        view = asyncio.run(view_cpu(pids, args.seconds))
        result = {
            "what": "vmmtui attach: one full scan and the view at 4 Hz",
            "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} CPUs, Linux {platform.release()}",
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d"),
            "processes": len(pids), "fds_total": fds, "shared_files": len(sh.files), "kcmp_calls": sh.kcmp_calls,
            "scan_cold_ms_median": round(statistics.median(cold) * 1e3, 2),
            "scan_ms_median": round(statistics.median(scans) * 1e3, 2),
            "shares_ms_median": round(statistics.median(shares_t) * 1e3, 2),
            "full_poll_ms_median": round(statistics.median(full) * 1e3, 2),
            "full_poll_ms_max": round(max(full) * 1e3, 2),
            **view,
            "targets": {"full_poll_ms": 100, "view_cpu_percent": 10},
        }
    finally:
        load.stdin.close()
        load.wait()
    print(json.dumps(result, indent=1))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"attach-{result['date']}.json").write_text(json.dumps(result, indent=1) + "\n")


async def view_cpu(pids, seconds):
    from vmmtui.tui.attach import AttachApp

    app = AttachApp(pids, hz=4.0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(2.0)
        c0, w0, p0 = cpu(), time.monotonic(), app.polls
        await pilot.pause(seconds)
        c1, w1, p1 = cpu(), time.monotonic(), app.polls
        await pilot.press("q")
    return {"view_seconds": round(w1 - w0, 2), "view_polls_per_s": round((p1 - p0) / (w1 - w0), 2),
            "view_cpu_percent": round(100 * (c1 - c0) / (w1 - w0), 2)}


if __name__ == "__main__":
    main()
