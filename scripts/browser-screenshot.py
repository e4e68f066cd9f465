#!/usr/bin/env python3
"""Serve vmmtui with `vmmtui serve`, open the page in a real headless Chromium, wait until the
terminal shows TEXT (read from what the page's websocket received), save a PNG screenshot.
The page opens at the URL serve prints (its token in it). With ``--offline`` Chromium resolves no
name but localhost, as in a lecture hall whose outbound traffic is dropped; either way every
address the page asks for beyond the server is reported, and any makes the run fail.

    python scripts/browser-screenshot.py --out screenshots/browser-replay.png -- replay cpu-memfd-1mib

With ``--page FILE.html`` (a page from ``vmmtui replay NAME --html``) no server runs: the file opens
from ``file://``, the ``--keys`` are pressed one by one (the frame shown after each is reported),
then it waits until the frame shows TEXT and saves the PNG. It prints one JSON line: the frames
after each key, the position line, the note and every address the page asked for beyond the file.

Chromium is driven through its DevTools protocol (aiohttp, which textual-serve already needs).
Exit 0 when the page showed TEXT and the PNG was written; 1 otherwise; 2 when Chromium is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
#: the terminal's text where xterm.js keeps it in the DOM (its canvas renderers do not: then the
#: websocket frames are read instead)
READ_TERMINAL = """(() => {
  const rows = document.querySelectorAll('.xterm-rows > div');
  if (rows.length) return Array.from(rows).map(r => r.textContent).join('\\n');
  const a = document.querySelector('.xterm-accessibility-tree');
  return a ? a.textContent : '';
})()"""


def chromium() -> str | None:
    return next(
        (
            p
            for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))
            if p
        ),
        None,
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


async def shoot(
    devtools: int, url: str, out: Path, text: str, timeout: float, size: tuple[int, int]
) -> tuple[str, list[str]]:
    """(the terminal's text, every address the page asked for beyond the server)."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            try:
                async with http.get(f"http://127.0.0.1:{devtools}/json/list") as r:
                    pages = [p for p in await r.json() if p.get("type") == "page"]
                if pages:
                    break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = iter(range(1, 1 << 30))

            received: list[
                str
            ] = []  # what the page's websocket got from vmmtui: the terminal's output
            asked: list[str] = []  # every address the page asked for

            async def call(method: str, **params):
                n = next(ids)
                await ws.send_str(json.dumps({"id": n, "method": method, "params": params}))
                async for msg in ws:
                    data = json.loads(msg.data)
                    if data.get("method") == "Network.requestWillBeSent":
                        asked.append(data["params"]["request"]["url"])
                    elif data.get("method") == "Network.webSocketCreated":
                        asked.append(data["params"]["url"])
                    if data.get("method") == "Network.webSocketFrameReceived":
                        frame = data["params"]["response"]
                        payload = frame.get("payloadData", "")
                        if frame.get("opcode") == 2:
                            payload = base64.b64decode(payload).decode("utf-8", "replace")
                        received.append(payload)
                    if data.get("id") == n:
                        return data.get("result", {})
                raise RuntimeError("DevTools closed the connection")

            await call(
                "Emulation.setDeviceMetricsOverride",
                width=size[0],
                height=size[1],
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Network.enable")
            await call("Page.navigate", url=url)
            deadline = time.monotonic() + timeout
            seen = ""
            while time.monotonic() < deadline:
                res = await call("Runtime.evaluate", expression=READ_TERMINAL, returnByValue=True)
                seen = (res.get("result", {}).get("value") or "") + "".join(received)
                if text in seen:
                    await asyncio.sleep(1.0)  # the last paint of the frame
                    break
                await asyncio.sleep(0.25)
            shot = await call("Page.captureScreenshot", format="png")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(base64.b64decode(shot["data"]))
            server = url.split("/?", 1)[0]
            ws_server = "ws" + server[len("http") :]
            beyond = [
                a
                for a in asked
                if not a.startswith((server + "/", ws_server + "/", "data:", "blob:"))
            ]
            return seen, beyond


def serving_url(serve: subprocess.Popen, timeout: float) -> str | None:
    """The URL in serve's "serving ... at URL" line (its token in it), or None."""
    import select

    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline and not line.endswith(b"\n"):
        ready, _, _ = select.select([serve.stderr], [], [], 0.2)
        if ready:
            chunk = os.read(serve.stderr.fileno(), 4096)
            if not chunk:
                break
            line += chunk
    for word in line.decode(errors="replace").split():
        if word.startswith("http://") and "token=" in word:
            return word
    sys.stderr.write(line.decode(errors="replace"))
    return None


#: what the page shows now: its frame, the position line, the note and the frame's text; the
#: keys line; the event log (its lines, whether it scrolls and where); the frame's text size on
#: screen in CSS pixels (the SVG's font size times the scale it is drawn at)
READ_PAGE = """(() => {
  const svg = document.querySelector('#frame svg');
  const text = svg && svg.querySelector('text');
  const box = svg && svg.viewBox && svg.viewBox.baseVal;
  const scale = box && box.width ? svg.getBoundingClientRect().width / box.width : 0;
  const log = document.getElementById('log');
  return {
    frame: document.body.dataset.frame === undefined ? -1 : +document.body.dataset.frame,
    position: document.getElementById('position').textContent,
    note: document.getElementById('note').textContent,
    text: document.getElementById('frame').textContent,
    keys: (document.getElementById('keys') || {}).textContent || '',
    text_px: text ? parseFloat(getComputedStyle(text).fontSize) * scale : 0,
    log_lines: log ? log.textContent.split('\\n').length : 0,
    log_scrolls: log ? log.scrollHeight > log.clientHeight &&
      getComputedStyle(log).overflowY === 'auto' : false,
    log_at_end: log ? Math.abs(log.scrollHeight - log.clientHeight - log.scrollTop) < 2 : false,
    // which of the parts a student needs are wholly on screen, without scrolling
    on_screen: ['#frame svg', '#next', '#keys', '#note'].filter(sel => {
      const e = document.querySelector(sel);
      const r = e && e.getBoundingClientRect();
      return !!r && r.height > 0 && r.top >= 0 && r.left >= 0 &&
        r.bottom <= innerHeight + 0.5 && r.right <= innerWidth + 0.5;
    }),
  };
})()"""


async def drive_page(
    devtools: int, url: str, out: Path, text: str, keys: list[str], timeout: float, size
) -> dict:
    """Open the page, press ``keys``, wait for ``text`` in the frame; what was seen on the way."""
    import aiohttp

    async with aiohttp.ClientSession() as http:
        for _ in range(100):
            try:
                async with http.get(f"http://127.0.0.1:{devtools}/json/list") as r:
                    pages = [p for p in await r.json() if p.get("type") == "page"]
                if pages:
                    break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        async with http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            ids = iter(range(1, 1 << 30))
            asked: list[str] = []  # every address the page asked for
            errors: list[str] = []

            async def call(method: str, **params):
                n = next(ids)
                await ws.send_str(json.dumps({"id": n, "method": method, "params": params}))
                async for msg in ws:
                    data = json.loads(msg.data)
                    if data.get("method") == "Network.requestWillBeSent":
                        asked.append(data["params"]["request"]["url"])
                    elif data.get("method") == "Runtime.exceptionThrown":
                        errors.append(data["params"]["exceptionDetails"].get("text", "?"))
                    if data.get("id") == n:
                        return data.get("result", {})
                raise RuntimeError("DevTools closed the connection")

            async def state() -> dict:
                res = await call("Runtime.evaluate", expression=READ_PAGE, returnByValue=True)
                return res.get("result", {}).get("value") or {}

            async def settle(was: int) -> dict:
                deadline = time.monotonic() + timeout
                seen = await state()
                while time.monotonic() < deadline and seen.get("frame", -1) == was:
                    await asyncio.sleep(0.05)
                    seen = await state()
                return seen

            await call(
                "Emulation.setDeviceMetricsOverride",
                width=size[0],
                height=size[1],
                deviceScaleFactor=1,
                mobile=False,
            )
            await call("Network.enable")
            await call("Runtime.enable")
            await call("Page.navigate", url=url)
            seen = await settle(-1)
            frames = [seen.get("frame", -1)]
            codes = {"ArrowRight": 39, "ArrowLeft": 37, "Home": 36, "End": 35, " ": 32}
            for key in keys:
                key = {"bracketright": "]", "bracketleft": "[", "space": " "}.get(key, key)
                was = seen.get("frame", -1)
                for kind in ("keyDown", "keyUp"):
                    await call(
                        "Input.dispatchKeyEvent",
                        type=kind,
                        key=key,
                        code=key,
                        windowsVirtualKeyCode=codes.get(key, 0),
                    )
                seen = await settle(was)
                frames.append(seen.get("frame", -1))
            deadline = time.monotonic() + timeout
            while text not in seen.get("text", "") and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                seen = await state()
            await asyncio.sleep(0.3)
            shot = await call("Page.captureScreenshot", format="png")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(base64.b64decode(shot["data"]))
            beyond = [a for a in asked if not a.startswith(("file:", "data:", "blob:"))]
            return {
                "frames": frames,
                "keys": seen.get("keys", ""),
                "text_px": seen.get("text_px", 0),
                "log_lines": seen.get("log_lines", 0),
                "log_scrolls": seen.get("log_scrolls", False),
                "log_at_end": seen.get("log_at_end", False),
                "on_screen": seen.get("on_screen", []),
                "position": seen.get("position", ""),
                "note": seen.get("note", ""),
                "text": seen.get("text", ""),
                "text_seen": text in seen.get("text", ""),
                "network": beyond,
                "errors": errors,
            }


def open_page(browser: str, page: Path, a) -> int:
    """--page: the file from disk, no server."""
    devtools = free_port()
    size = tuple(int(v) for v in a.size.split("x"))
    profile = tempfile.mkdtemp(prefix="vmmtui-chromium-")
    chrome = subprocess.Popen(
        [
            browser,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--remote-debugging-port={devtools}",
            f"--window-size={size[0]},{size[1]}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        if not wait_port(devtools, 30):
            print("chromium did not open its DevTools port", file=sys.stderr)
            return 1
        keys = [k for k in a.keys.split(",") if k]
        seen = asyncio.run(
            drive_page(devtools, page.resolve().as_uri(), a.out, a.text, keys, a.timeout, size)
        )
        print(json.dumps(seen))
        ok = seen["text_seen"] and not seen["network"] and not seen["errors"]
        print(
            f"{'ok' if ok else 'NOT SEEN'}: {a.text!r} in the frame after {keys}; "
            f"network {seen['network'] or 'none'}; screenshot {a.out}",
            file=sys.stderr,
        )
        return 0 if ok else 1
    finally:
        if chrome.poll() is None:
            os.killpg(chrome.pid, signal.SIGTERM)
            try:
                chrome.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(chrome.pid, signal.SIGKILL)
                chrome.wait()
        shutil.rmtree(profile, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("screenshots/browser-replay.png"))
    p.add_argument("--text", default="REPLAY", help="wait until the terminal shows this")
    p.add_argument("--timeout", type=float, default=40.0)
    p.add_argument("--size", default="1600x1000", help="the page's size in CSS pixels")
    p.add_argument("--page", type=Path, help="a page from `vmmtui replay --html`: opened from disk")
    p.add_argument("--keys", default="", help="--page: keys to press, e.g. ArrowRight,End")
    p.add_argument("--offline", action="store_true", help="Chromium resolves no name but localhost")
    p.add_argument("args", nargs=argparse.REMAINDER, help="vmmtui serve's arguments (after --)")
    a = p.parse_args()
    browser = chromium()
    if browser is None:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    if a.page is not None:
        if not a.page.is_file():
            print(
                f"{a.page}: no such page (make one with vmmtui replay NAME --html FILE)",
                file=sys.stderr,
            )
            return 2
        return open_page(browser, a.page, a)
    args = [x for x in a.args if x != "--"] or ["replay", "cpu-memfd-1mib"]
    port, devtools = free_port(), free_port()
    size = tuple(int(v) for v in a.size.split("x"))
    serve = subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "serve", "--port", str(port), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    profile = tempfile.mkdtemp(prefix="vmmtui-chromium-")
    chrome = None
    offline = ["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost"] if a.offline else []
    try:
        url = serving_url(serve, 30)
        if url is None:
            print("vmmtui serve did not print where it serves", file=sys.stderr)
            return 1
        chrome = subprocess.Popen(
            [
                browser,
                *FLAGS,
                *offline,
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={devtools}",
                f"--window-size={size[0]},{size[1]}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        if not wait_port(devtools, 30):
            print("chromium did not open its DevTools port", file=sys.stderr)
            return 1
        seen, beyond = asyncio.run(shoot(devtools, url, a.out, a.text, a.timeout, size))
        print(f"{len(seen)} characters of terminal output read from the page", file=sys.stderr)
        ok = a.text in seen and a.out.stat().st_size > 0 and not beyond
        print(
            f"{'ok' if ok else 'NOT SEEN'}: {a.text!r} in the page; asked beyond the server: "
            f"{beyond or 'nothing'}; screenshot {a.out}",
            file=sys.stderr,
        )
        return 0 if ok else 1
    finally:
        for proc in (chrome, serve):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
