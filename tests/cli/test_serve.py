"""`vmmtui serve` as a newcomer meets it: a busy port, a port that does not exist, options after
`replay NAME`, and Ctrl-C while a real websocket client (a browser's page) is connected; and as
an intruder meets it: another local user without the token, a fifth page, kill -9 of the server
with a page open, a page in a browser that cannot reach the internet."""

import asyncio
import contextlib
import os
import pwd
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil
import pytest

from vmmtui.cli.webserver import ENDED, FULL, STOPPED

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vmmtui", "serve", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def serving_line(proc: subprocess.Popen, timeout: float = 60) -> str:
    """serve's first line ("vmmtui: serving ... at URL (...)"), read as it comes."""
    deadline = time.monotonic() + timeout
    line = ""
    while not line.endswith("\n"):
        assert time.monotonic() < deadline, f"serve said nothing in {timeout} s: {line!r}"
        if select.select([proc.stderr], [], [], 0.2)[0]:
            chunk = proc.stderr.readline()
            assert chunk, f"serve ended: {line!r} {proc.communicate()[1]!r}"
            line += chunk
    return line


def printed_url(line: str) -> str:
    found = re.search(r" at (http://\S+/\?token=[A-Za-z0-9_-]{40,}) ", line)
    assert found, line
    return found.group(1)


def wait_serving(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Until the page is served (the port listens a moment before: bound before the loop runs)."""
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        try:
            with urllib.request.urlopen(url, timeout=5) as page:
                if page.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("serve did not serve")


def started(*args, **kw) -> tuple[subprocess.Popen, str]:
    """serve with ``args``, once it serves: (the process, the URL it printed)."""
    proc = serve(*args, **kw)
    try:
        url = printed_url(serving_line(proc))
        wait_serving(url, proc)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, url


def ws_url(url: str, token: bool = True, width: int = 100, height: int = 30) -> str:
    base, _, query = url.partition("/?")
    return f"{base}/ws?{query + '&' if token else ''}width={width}&height={height}"


def stop(proc: subprocess.Popen) -> str:
    """SIGINT, then what serve wrote after its first line."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=30)[1]
    finally:
        proc.kill()


def test_a_busy_port_is_one_line_with_the_fix_and_exit_1():
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        res = subprocess.run(
            [sys.executable, "-m", "vmmtui", "serve", "--host", "127.0.0.1", "--port", str(port)]
            + ["replay", "cpu-memfd-1mib"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"port {port} on 127.0.0.1 is in use" in res.stderr and "--port " in res.stderr
    assert "Traceback" not in res.stderr + res.stdout


@pytest.mark.parametrize("port", ["0", "65536", "99999", "-1", "http"])
def test_a_port_outside_1_to_65535_is_refused_with_exit_2(port):
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "serve", "--port", port],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--port" in res.stderr and "Traceback" not in res.stderr


def test_serve_replay_name_then_port_is_accepted_and_a_bad_value_there_is_refused():
    port = free_port()
    proc, url = started("replay", "cpu-memfd-1mib", "--host", "127.0.0.1", f"--port={port}")
    err = stop(proc)
    assert proc.returncode == 130 and url.startswith(f"http://127.0.0.1:{port}/?token="), url
    assert "Traceback" not in err
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "serve", "replay", "cpu-memfd-1mib", "--port", "99999"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and "port 99999 does not exist" in res.stderr


async def open_page_then_interrupt(url: str, server: subprocess.Popen) -> tuple[bytes, float, list]:
    """A websocket client as the page's: wait for the viewer to draw, SIGINT the server, read on
    until the server closes the socket; (what the page got after the signal, seconds, viewers)."""
    async with aiohttp.ClientSession() as http, http.ws_connect(ws_url(url)) as ws:
        drawn = 0
        while drawn < 2000:  # the replay's first frame
            msg = await ws.receive(timeout=60)
            assert msg.type == aiohttp.WSMsgType.BINARY, msg
            drawn += len(msg.data)
        viewers = psutil.Process(server.pid).children(recursive=True)
        assert viewers, "no viewer process behind the page"
        server.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        after = b""
        while True:
            msg = await ws.receive(timeout=60)
            if msg.type != aiohttp.WSMsgType.BINARY:
                break
            after += msg.data
        while server.poll() is None and time.monotonic() - t0 < 60:
            await asyncio.sleep(0.02)
        return after, time.monotonic() - t0, viewers


@pytest.mark.serial  # stops within 10 s
def test_ctrl_c_with_a_page_open_stops_soon_and_the_page_says_so():
    port = free_port()
    server, url = started("--host", "127.0.0.1", "--port", str(port), "replay", "cpu-memfd-1mib")
    try:
        after, took, viewers = asyncio.run(open_page_then_interrupt(url, server))
        _, err = server.communicate(timeout=30)
    finally:
        server.kill()
    # about 0.2 s on an idle machine (22 to 30 s before this round); generous for a loaded one
    assert took < 10, f"the server took {took:.1f} s to stop"
    assert STOPPED in after, after[-300:]
    assert server.returncode == 130, err
    assert "stopped serving (interrupted by SIGINT); 1 open page told so" in err, err
    assert "Traceback" not in err
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(v.is_running() for v in viewers):
        time.sleep(0.05)
    assert not [v for v in viewers if v.is_running() and v.status() != psutil.STATUS_ZOMBIE]


def test_a_host_that_is_not_this_machines_is_bad_input():
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "serve", "--host", "192.0.2.1", "--port", "8123"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--host 192.0.2.1 is not an address of this machine" in res.stderr


def test_ctrl_c_the_moment_the_port_listens_is_never_a_traceback():
    """The sockets are bound before the event loop exists: an interrupt then (seen in CI) is one
    line, whichever side of the loop's start it falls."""
    for _ in range(5):
        port = free_port()
        proc = serve("--host", "127.0.0.1", "--port", str(port), "replay", "cpu-memfd-1mib")
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.002)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
        assert proc.returncode == 130 and "Traceback" not in err, err
        assert "Exception ignored" not in err, err


@pytest.mark.parametrize("pages", ["0", "65", "-1", "four"])
def test_a_page_count_outside_1_to_64_is_refused_with_exit_2(pages):
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "serve", "--max-pages", pages],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--max-pages" in res.stderr and "Traceback" not in res.stderr


def viewers(server: subprocess.Popen) -> list[psutil.Process]:
    """The server's children that run (a zombie is gone but for its exit status)."""
    return [
        p
        for p in psutil.Process(server.pid).children(recursive=True)
        if p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    ]


@pytest.fixture
def other_user():
    """A second local account, made for the test and removed after."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        pytest.skip("making a second local user needs root, useradd and setpriv")
    if not shutil.which("curl"):
        pytest.skip("the second user's client is curl, which is not installed")
    name = f"vmmtui-rt{os.getpid() % 100000}"
    made = subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.skip(f"useradd refused: {made.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def as_user(user, *curl_args: str) -> str:
    """curl run as ``user``: the HTTP status it got."""
    res = subprocess.run(
        ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]
        + ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", *curl_args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    return res.stdout


UPGRADE = [
    "-H",
    "Connection: Upgrade",
    "-H",
    "Upgrade: websocket",
    "-H",
    "Sec-WebSocket-Version: 13",
    "-H",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
]


def test_another_local_user_without_the_token_gets_403_and_nothing_starts(other_user, tmp_path):
    port = free_port()
    server, url = started("--host", "127.0.0.1", "--port", str(port), "--backend", "memfd")
    try:
        base = f"http://127.0.0.1:{port}"
        assert as_user(other_user, f"{base}/") == "403"
        assert as_user(other_user, f"{base}/?token=guess") == "403"
        assert as_user(other_user, "-b", f"vmmtui-serve-{port}=guess", f"{base}/") == "403"
        assert as_user(other_user, *UPGRADE, f"{base}/ws?width=80&height=24") == "403"
        assert as_user(other_user, *UPGRADE, f"{base}/ws?token=guess") == "403"
        assert as_user(other_user, f"{base}/static/js/textual.js") == "403"
        time.sleep(1.0)  # a viewer started by any of them would show by now
        assert viewers(server) == [], "a request without the token started a process"
        # the same user, given the URL, is served: the port was reachable, the token was missing
        assert as_user(other_user, url) == "200"
        assert viewers(server) == []  # the page alone starts nothing; its websocket would
    finally:
        err = stop(server)
    assert "Traceback" not in err


async def read_until(ws, size: int, timeout: float = 60) -> bytes:
    got = b""
    deadline = time.monotonic() + timeout
    while len(got) < size:
        msg = await ws.receive(timeout=max(0.1, deadline - time.monotonic()))
        assert msg.type == aiohttp.WSMsgType.BINARY, msg
        got += msg.data
    return got


async def four_pages_then_a_fifth(url: str, server: subprocess.Popen) -> None:
    jar = aiohttp.CookieJar(unsafe=True)  # a browser keeps a cookie for 127.0.0.1; aiohttp asks
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(url) as page:  # the printed URL, as a browser opens it
            assert page.status == 200 and "textual-terminal" in await page.text()
        pages = []
        for i in range(4):  # two with the token in the query, two with the page's cookie alone
            pages.append(await http.ws_connect(ws_url(url, token=i < 2)))
            await read_until(pages[-1], 2000)  # the viewer drew its first frame
        assert len(viewers(server)) == 4
        fifth = await http.ws_connect(ws_url(url))
        told = await read_until(fifth, 20)
        assert told == FULL.format(n=4, s="s").encode(), told
        await asyncio.sleep(1.0)
        assert len(viewers(server)) == 4, "the fifth page started a process"
        await fifth.close()
        await pages.pop().close()  # one leaves: its viewer quits, a new page is served
        deadline = time.monotonic() + 30
        while len(viewers(server)) > 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        pages.append(await http.ws_connect(ws_url(url)))
        await read_until(pages[-1], 2000)
        for ws in pages:
            await ws.close()


def test_the_printed_url_works_and_a_fifth_page_is_refused_while_four_are_open(tmp_path):
    port = free_port()
    server, url = started(
        "--host", "127.0.0.1", "--port", str(port), "replay", "cpu-memfd-1mib", cwd=tmp_path
    )
    try:
        asyncio.run(four_pages_then_a_fifth(url, server))
    finally:
        err = stop(server)
    assert "Traceback" not in err
    # no request log in the teacher's terminal: after the serving line, only the last line
    assert err.strip().splitlines() == ["vmmtui: stopped serving (interrupted by SIGINT)"], err
    assert list(tmp_path.iterdir()) == []


async def page_open_then_kill_9(url: str, server: subprocess.Popen, tmp: Path) -> list:
    """A page on the live inspector, its workers and session directory up; then kill -9 of
    the server; what ran behind the page."""
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(ws_url(url, width=160, height=48)) as ws,
    ):
        deadline = time.monotonic() + 60
        behind: list[psutil.Process] = []
        while time.monotonic() < deadline:
            with contextlib.suppress(asyncio.TimeoutError):
                await ws.receive(timeout=0.2)
            behind = viewers(server)
            workers = []
            for p in behind:
                with contextlib.suppress(psutil.Error):  # gone between the listing and the look
                    if "vmmtui.worker" in " ".join(p.cmdline()):
                        workers.append(p)
            if len(workers) >= 2 and any(tmp.glob("vmmtui-*")):
                break
        assert len(workers) >= 2 and any(tmp.glob("vmmtui-*")), (behind, list(tmp.iterdir()))
        server.kill()
        server.wait()
        await asyncio.sleep(2.0)
        return behind


def test_kill_9_of_serve_with_a_page_open_leaves_no_process_and_no_directory(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    port = free_port()
    env = dict(os.environ, TMPDIR=str(tmp))
    env.pop("XDG_RUNTIME_DIR", None)
    server, url = started(
        "--host", "127.0.0.1", "--port", str(port), "--backend", "memfd", env=env, cwd=tmp_path
    )
    try:
        behind = asyncio.run(page_open_then_kill_9(url, server, tmp))
    finally:
        server.kill()
        server.communicate()
    left = [p for p in behind if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"2 s after kill -9 of serve: {left}"
    assert list(tmp.iterdir()) == [], "a session directory outlived the server"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


async def press_s(url: str, server: subprocess.Popen) -> None:
    async with aiohttp.ClientSession() as http, http.ws_connect(ws_url(url)) as ws:
        await read_until(ws, 2000)
        await ws.send_json(["stdin", "s"])
        end = time.monotonic() + 3
        while time.monotonic() < end:  # the toast that answers it, whatever it says
            with contextlib.suppress(asyncio.TimeoutError):
                await ws.receive(timeout=0.2)


@pytest.mark.parametrize("shots", [False, True])
def test_s_in_a_page_writes_nothing_where_the_server_runs(tmp_path, shots):
    """Off unless serve was given --shots DIR; then in DIR, which the serving line names."""
    cwd, where = tmp_path / "cwd", tmp_path / "shots"
    cwd.mkdir()
    port = free_port()
    args = ["--host", "127.0.0.1", "--port", str(port)] + (["--shots", str(where)] if shots else [])
    server = serve(*args, "replay", "cpu-memfd-1mib", cwd=cwd)
    try:
        line = serving_line(server)
        url = printed_url(line)
        wait_serving(url, server)
        assert (f"screenshots (s) go to {where}" if shots else "screenshots (s) are off") in line
        asyncio.run(press_s(url, server))
    finally:
        stop(server)
    assert list(cwd.iterdir()) == []
    if shots:
        assert [p.suffix for p in where.iterdir()] == [".svg"]
    else:
        assert not where.exists()


CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium here (apt-get install -y chromium)")
def test_the_page_shows_the_terminal_in_a_browser_that_cannot_reach_the_internet(tmp_path):
    """Chromium resolving no name but localhost (a lecture hall that drops outbound traffic):
    the page loads, draws the replay, and asks for nothing beyond the server."""
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run(
        [sys.executable, str(root / "scripts" / "browser-screenshot.py"), "--offline"]
        + ["--out", str(tmp_path / "page.png"), "--text", "PASSED", "--timeout", "60", "--"]
        + ["replay", "cpu-memfd-1mib", "--step", "19"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    assert res.returncode == 0, res.stderr
    assert "asked beyond the server: nothing" in res.stderr, res.stderr


async def a_page_whose_vmmtui_dies_then_another(url: str, server: subprocess.Popen) -> bytes:
    """One seat (--max-pages 1): a page, its vmmtui killed; what that page is told, and the next
    page is served, not told "full"."""
    async with aiohttp.ClientSession() as http:
        first = await http.ws_connect(ws_url(url))
        await read_until(first, 2000)
        (viewer,) = viewers(server)
        viewer.kill()
        told = b""
        while True:  # the page is told, then closed: not left open on a dead terminal
            msg = await first.receive(timeout=30)
            if msg.type != aiohttp.WSMsgType.BINARY:
                break
            told += msg.data
        assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED), msg
        second = await http.ws_connect(ws_url(url))
        drawn = await read_until(second, 2000)
        assert FULL.format(n=1, s="").encode() not in drawn
        assert len(viewers(server)) == 1
        await second.close()
        await first.close()
        return told


def test_a_page_whose_vmmtui_dies_is_told_and_its_seat_is_free_at_once():
    port = free_port()
    server, url = started(
        "--host", "127.0.0.1", "--port", str(port), "--max-pages", "1", "replay", "cpu-memfd-1mib"
    )
    try:
        told = asyncio.run(a_page_whose_vmmtui_dies_then_another(url, server))
    finally:
        err = stop(server)
    assert ENDED.format(how="killed by SIGKILL").encode() in told, told[-400:]
    assert "Traceback" not in err


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_serve_ended_by_a_signal_exits_128_plus_it_with_one_line(name):
    """serve follows every command's rule (docs/troubleshooting.md): a stop signal is 128 + it
    (it exited 0), said in its last line, with no "Exception ignored" from the signal wakeup fd."""
    port = free_port()
    proc, _ = started("--host", "127.0.0.1", "--port", str(port), "replay", "cpu-memfd-1mib")
    try:
        proc.send_signal(getattr(signal, name))
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 128 + getattr(signal, name), err
    assert f"stopped serving (interrupted by {name})" in err
    assert "Traceback" not in err and "Exception ignored" not in err, err
