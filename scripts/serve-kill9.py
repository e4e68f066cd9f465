#!/usr/bin/env python3
"""kill -9 of `vmmtui serve` with a page open on the live inspector: what is left 2 s later.

Starts `vmmtui serve` with the inspector's options given here (default: --backend cuda), opens one
page as a browser would (a websocket client with the printed token), waits until the page's
workers run and its session directory exists, presses space a few times (steps run: on cuda the
memory is allocated and exported), kills the server with SIGKILL, waits 2 s and prints one JSON
line: the processes that ran behind the page, those still running, session directories left,
and the GPU processes nvidia-smi lists (where it exists). Exit 0 when nothing is left.

    python scripts/serve-kill9.py -- --backend cuda --size 1GiB
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import aiohttp
import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def running(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def described(p: psutil.Process) -> str:
    try:
        return f"{p.pid} {' '.join(p.cmdline()[1:4])}"
    except psutil.Error:
        return f"{p.pid} (gone)"


def gpu_apps() -> list[str] | None:
    if not shutil.which("nvidia-smi"):
        return None
    res = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    )
    return [line for line in res.stdout.splitlines() if line.strip()]


async def page(url: str, server: subprocess.Popen, tmp: str, steps: int) -> dict:
    base, _, query = url.partition("/?")
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(f"{base}/ws?{query}&width=160&height=48") as ws,
    ):
        deadline = time.monotonic() + 60
        behind: list[psutil.Process] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                await ws.receive(timeout=0.2)
            behind = running(psutil.Process(server.pid).children(recursive=True))
            workers = [p for p in behind if "vmmtui.worker" in described(p)]
            if len(workers) >= 2 and any(n.startswith("vmmtui-") for n in os.listdir(tmp)):
                break
        for _ in range(steps):
            await ws.send_json(["stdin", " "])
            end = time.monotonic() + 1.5
            while time.monotonic() < end:
                with contextlib.suppress(TimeoutError):
                    await ws.receive(timeout=0.2)
        behind = running(psutil.Process(server.pid).children(recursive=True))
        names = [described(p) for p in behind]
        gpu_before = gpu_apps()
        dirs_before = os.listdir(tmp)
        server.kill()
        server.wait()
        t0 = time.monotonic()
        await asyncio.sleep(2.0)
        left = running(behind)
        return {
            "behind_the_page": names,
            "dirs_before": dirs_before,
            "gpu_apps_before": gpu_before,
            "after_s": round(time.monotonic() - t0, 2),
            "left": [described(p) for p in left],
            "dirs_left": os.listdir(tmp),
            "gpu_apps_after": gpu_apps(),
        }


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--"] or ["--backend", "cuda", "--size", "1GiB"]
    tmp = tempfile.mkdtemp(prefix="serve-kill9-")
    env = dict(os.environ, TMPDIR=tmp)
    env.pop("XDG_RUNTIME_DIR", None)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "serve", "--host", "127.0.0.1", "--port", str(port)]
        + args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        if not select.select([server.stderr], [], [], 60)[0]:
            print("serve said nothing in 60 s", file=sys.stderr)
            return 1
        line = server.stderr.readline()
        url = next((w for w in line.split() if "token=" in w), None)
        if url is None:
            print(f"serve did not print its URL: {line!r}", file=sys.stderr)
            return 1
        time.sleep(1.0)
        seen = asyncio.run(page(url, server, tmp, steps=8))
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGKILL)
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)  # what it found there is reported below
    print(json.dumps(seen))
    gpu_left = [a for a in seen["gpu_apps_after"] or [] if a.split(",")[0].strip().isdigit()]
    ok = not seen["left"] and not seen["dirs_left"] and not gpu_left
    print(
        f"{'ok' if ok else 'LEFT BEHIND'}: {len(seen['behind_the_page'])} processes behind the "
        f"page; {seen['after_s']} s after kill -9 of serve: processes {seen['left'] or 'none'}, "
        f"directories {seen['dirs_left'] or 'none'}, GPU apps {seen['gpu_apps_after']}",
        file=sys.stderr,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
