"""The web server behind ``vmmtui serve``: textual-serve's, guarded, on sockets we bound, stopping at once.

Guarded as Jupyter guards its server: every local user can reach a port on localhost (and with
``--host 0.0.0.0`` the network can), and each page runs vmmtui as the user who serves it. So every
request needs the token made at start (``?token=`` on the printed URL, or the cookie the page
with it set), compared in constant time; a browser's websocket must also come from the page's own
origin. Without them: 403, and nothing starts. At most ``max_pages`` pages run at once; one more
is told so in its terminal, and nothing starts for it. Each page's vmmtui dies with the server
(``vmmtui.system.lifeline``): kill -9 of the server ends them, their workers and their directories.
The page is ours (``page/app_index.html``): it loads nothing from the internet (the font is
textual-serve's own copy, from this server), and requests are not logged.

Binding the listening sockets here (not inside aiohttp) turns a busy port, a privileged port or a
host that is not ours into one line before anything is served. On Ctrl-C (SIGINT, SIGTERM, a
closed terminal) every open page is told in its terminal that the server stopped and its
websocket is closed, so that the page shows it and the viewer's vmmtui quits (and cleans up its
workers); the server waits at most SHUTDOWN_S for them, not aiohttp's 60 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hmac
import os
import secrets
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server

from vmmtui.cli.options import EXIT_FAILED, EXIT_USAGE
from vmmtui.model.ends import End
from vmmtui.system.interrupts import signals_held
from vmmtui.system.lifeline import SERVED_SHOTS, SERVER_PID
from vmmtui.words.programs import end_words

#: how long a stop waits for the viewers' processes to quit before it ends anyway
SHUTDOWN_S = 1.5
#: what an open page's terminal shows when the server stops (then the page's "Session ended.")
STOPPED = (
    b"\r\n\x1b[1;33m vmmtui serve stopped (Ctrl-C on the server): this page no longer updates."
    b"\x1b[0m\r\n Start the server again, then press Restart.\r\n"
)
#: what a page beyond --max-pages shows in its terminal (nothing is started for it)
FULL = (
    "\r\n\x1b[1;33m vmmtui serve is full: {n} page{s} open, the most it serves at once "
    "(--max-pages {n}).\x1b[0m\r\n Close another page, then reload this one.\r\n"
)
#: what a page's terminal shows when its vmmtui ended by itself (it crashed, was killed); its seat
#: is free by then
ENDED = (
    "\r\n\x1b[1;33m vmmtui ended in this page ({how}); its place is free.\x1b[0m\r\n"
    " Reload the page to start another.\r\n"
)
#: the answer to a request without the token: nothing more (no page, no process)
FORBIDDEN = (
    "403: this vmmtui serve needs its token: open the URL it printed when it started "
    "(http://HOST:PORT/?token=...)\n"
)
#: the page (ours: textual-serve's loads a font from the internet)
PAGE = Path(__file__).parent / "page"


class ListenError(Exception):
    """Cannot listen where asked: one line with the fix, and the exit status it deserves."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def free_port_near(host: str, port: int) -> int | None:
    """A port after ``port`` that is free on ``host`` now, to suggest; None if none of 20 is."""
    for candidate in range(port + 1, min(port + 21, 65536)):
        with contextlib.suppress(OSError), socket.create_server((host, candidate)):
            return candidate
    return None


def listen(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address of ``host`` (localhost: IPv4 and IPv6), as aiohttp
    would make them; ListenError with the cause and the fix when one cannot be had."""
    try:
        infos = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE | socket.AI_ADDRCONFIG
        )
    except socket.gaierror as exc:
        raise ListenError(
            f"--host {host}: not an address of this machine ({exc.strerror}): use localhost, "
            "0.0.0.0 (every address) or one of this machine's addresses",
            EXIT_USAGE,
        ) from None
    sockets: list[socket.socket] = []
    missing: OSError | None = None
    for family, kind, proto, _, address in dict.fromkeys(infos):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(128)
            sock.setblocking(False)
            sockets.append(sock)
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                missing = exc  # localhost's ::1 where IPv6 is off: the other address serves
                continue
            for other in sockets:
                other.close()
            raise _why(exc, host, port) from None
    if not sockets:
        raise _why(missing or OSError(errno.EADDRNOTAVAIL, "no address"), host, port)
    return sockets


def _why(exc: OSError, host: str, port: int) -> ListenError:
    if exc.errno == errno.EADDRINUSE:
        near = free_port_near(host, port)
        fix = f"choose another, e.g. --port {near}" if near else "choose another with --port"
        return ListenError(
            f"port {port} on {host} is in use (another vmmtui serve, or another server): "
            f"stop that one, or {fix}",
            EXIT_FAILED,
        )
    if exc.errno == errno.EACCES:
        return ListenError(
            f"port {port} needs privileges here (ports below 1024 are root's): "
            "choose --port 8000 or another above 1023",
            EXIT_FAILED,
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return ListenError(
            f"--host {host} is not an address of this machine: use localhost, 0.0.0.0 or one "
            "of its addresses",
            EXIT_USAGE,
        )
    return ListenError(f"cannot listen on {host} port {port}: {exc.strerror or exc}", EXIT_FAILED)


def new_token() -> str:
    """A fresh token for one run of the server, as Jupyter makes its own."""
    return secrets.token_urlsafe(32)


class PageService(AppService):
    """One page's vmmtui: exec'd by the shell (so that its parent is the server, whose death it
    asks the kernel to be told of), with the server's pid and where screenshots go. ``ended`` is
    called with how it ended once its output stops: textual-serve closes the page only when the
    app says it quits, so a vmmtui that crashed or was killed would keep its page, and its seat."""

    def __init__(
        self,
        command: str,
        *,
        environment: dict[str, str],
        ended: Callable[[str], Awaitable[None]] | None = None,
        **kw,
    ) -> None:
        super().__init__(f"exec {command}", **kw)
        self.environment = environment
        self.ended = ended

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        return {**super()._build_environment(width, height), **self.environment}

    async def run(self) -> None:
        await super().run()
        if self.ended is not None:
            await self.ended(await self._how_it_ended())

    async def _how_it_ended(self) -> str:
        """``exited with code 1``, ``killed by SIGKILL``: its exit status, read from the kernel."""
        process = self._process
        code = None
        if process is not None:
            with contextlib.suppress(asyncio.TimeoutError, ProcessLookupError):
                code = await asyncio.wait_for(process.wait(), SHUTDOWN_S)
        if code is None:
            return "its output stopped"
        return end_words(End.of_returncode(code))  # as a worker's or a traced program's end


class ViewerServer(Server):
    """textual-serve's Server behind a token and a page cap, that knows its open pages, tells
    them when it stops, and stops soon."""

    def __init__(
        self,
        command: str,
        *,
        host: str,
        port: int,
        title: str,
        token: str,
        max_pages: int = 4,
        shots: str | None = None,
    ):
        super().__init__(command, host=host, port=port, title=title, templates_path=PAGE)
        self.token = token
        self.max_pages = max_pages
        #: where ``s`` saves a screenshot in a page; None: off
        self.shots = shots
        self.pages: set[web.WebSocketResponse] = set()
        #: the pages running now (a page counts from its websocket's arrival: no race between two)
        self.running = 0
        #: the pages told that the server stopped
        self.told = 0
        #: the signal that ended serving (SIGINT, SIGTERM, SIGHUP), or None
        self.stopped_by: int | None = None
        #: the pages refused because the server was full
        self.refused = 0
        #: the pages told that their vmmtui ended by itself
        self.ended = 0

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, as two servers on one host share a browser's cookies."""
        return f"vmmtui-serve-{self.port}"

    def admits(self, request: web.Request) -> bool:
        """The token, in the query or the cookie, compared in constant time; and a browser's
        request from another origin (another site's page, another local server) is refused."""
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            return False
        for given in (request.query.get("token"), request.cookies.get(self.cookie)):
            if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
                return True
        return False

    @web.middleware
    async def guard(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        if not self.admits(request):
            return web.Response(status=403, text=FORBIDDEN)
        return await handler(request)

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self.guard)
        return app

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        try:
            font_size = max(6, min(int(request.query.get("fontsize", "16")), 64))
        except ValueError:
            font_size = 16
        response = aiohttp_jinja2.render_template(
            "app_index.html", request, {"title": self.title, "font_size": font_size}
        )
        # the page's websocket carries no query of ours (textual.js adds its own): the cookie
        # takes the token there; HttpOnly (no script reads it), never sent by another site
        response.set_cookie(self.cookie, self.token, httponly=True, samesite="Strict", path="/")
        response.headers["Cache-Control"] = "no-store"
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        if self.running >= self.max_pages:
            return await self.refuse_full(request)
        self.running += 1
        seated = True

        def free() -> None:
            """The seat is free the moment its vmmtui ends, or when the page goes: once."""
            nonlocal seated
            if seated:
                seated = False
                self.running -= 1

        try:
            return await self.run_page(request, free)
        finally:
            free()

    async def refuse_full(self, request: web.Request) -> web.WebSocketResponse:
        """Tell the page in its terminal that the server is full; start nothing. The socket
        stays open (the message stays on screen) until the page goes or the server stops."""
        self.refused += 1
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        n = self.max_pages
        with contextlib.suppress(Exception):
            await websocket.send_bytes(FULL.format(n=n, s="s" if n != 1 else "").encode())
            self.pages.add(websocket)
            async for _ in websocket:
                pass
        self.pages.discard(websocket)
        return websocket

    async def run_page(
        self, request: web.Request, free: Callable[[], None] = lambda: None
    ) -> web.WebSocketResponse:
        """textual-serve's handle_websocket, with our AppService and no traceback printed. When
        the page's vmmtui ends by itself, its seat is freed (``free``) and the page is told, then
        closed; a vmmtui that quit as asked (q, the page closed, the server stopping) has no
        page left to tell."""
        websocket = web.WebSocketResponse(heartbeat=15)

        async def ended(how: str) -> None:
            free()
            if websocket.closed:
                return
            with contextlib.suppress(Exception):
                await websocket.send_bytes(ENDED.format(how=how).encode())
                self.ended += 1
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    websocket.close(code=WSCloseCode.OK, message=b"vmmtui ended"), SHUTDOWN_S
                )

        def size(name: str, default: int) -> int:
            try:
                return max(10, min(int(request.query.get(name, default)), 1000))
            except ValueError:
                return default

        environment = {SERVER_PID: str(os.getpid()), SERVED_SHOTS: self.shots or ""}
        service: PageService | None = None
        try:
            await websocket.prepare(request)
            service = PageService(
                self.command,
                environment=environment,
                ended=ended,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=self.download_manager,
                debug=False,
            )
            await service.start(size("width", 80), size("height", 24))
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception as exc:  # a page that went mid-way: that page ends, the server goes on
            with contextlib.suppress(Exception):
                await websocket.close(message=str(exc)[:100].encode())
        finally:
            if service is not None:
                with contextlib.suppress(Exception):
                    await service.stop()
        return websocket

    async def _process_messages(self, websocket, app_service) -> None:
        self.pages.add(websocket)
        try:
            await super()._process_messages(websocket, app_service)
        finally:
            self.pages.discard(websocket)

    async def on_startup(self, app: web.Application) -> None:
        """Quiet: serve has said where it serves, in one line."""

    async def on_shutdown(self, app: web.Application) -> None:
        for page in list(self.pages):
            with contextlib.suppress(Exception):
                await page.send_bytes(STOPPED)
                self.told += 1
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    page.close(code=WSCloseCode.GOING_AWAY, message=b"vmmtui serve stopped"),
                    SHUTDOWN_S,
                )

    def serve_on(self, sockets: list[socket.socket]) -> None:
        """Serve on the sockets ``listen`` made until SIGINT, SIGTERM or SIGHUP; requests are
        not logged (the teacher's terminal shows the serving line, not every click)."""
        # held while the loop is built: an interrupt there would leave a half-made loop (whose
        # __del__ prints a traceback); held, it reaches the loop's handler and stops it cleanly
        with signals_held():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(signum, self._stop_by, signum)
        try:
            web.run_app(
                self._make_app(),
                sock=sockets,
                shutdown_timeout=SHUTDOWN_S,
                access_log=None,
                handle_signals=False,
                loop=loop,
                print=lambda *args: None,
            )
        finally:
            for sock in sockets:
                sock.close()
            # the loop is closed: a signal from now on must not be written to its wakeup fd,
            # gone with it ("Exception ignored ... signal wakeup fd" was printed on SIGTERM)
            with contextlib.suppress(ValueError):
                signal.set_wakeup_fd(-1)

    def _stop_by(self, signum: int) -> None:
        """A stop signal: serving ends (its exit status is 128 + the first one's, as every
        command's: ``interrupts.exit_status``)."""
        if self.stopped_by is None:
            self.stopped_by = signum
        self.request_exit()
