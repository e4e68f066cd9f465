"""The web server behind ``vmmtui serve``: textual-serve's, on sockets we bound, stopping at once.

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
import signal
import socket

from aiohttp import WSCloseCode, web
from textual_serve.server import Server

from vmmtui.cli.options import EXIT_FAILED, EXIT_USAGE
from vmmtui.interrupts import signals_held

#: how long a stop waits for the viewers' processes to quit before it ends anyway
SHUTDOWN_S = 1.5
#: what an open page's terminal shows when the server stops (then the page's "Session ended.")
STOPPED = (
    b"\r\n\x1b[1;33m vmmtui serve stopped (Ctrl-C on the server): this page no longer updates."
    b"\x1b[0m\r\n Start the server again, then press Restart.\r\n"
)


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


class ViewerServer(Server):
    """textual-serve's Server that knows its open pages, tells them when it stops, and stops soon."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.pages: set[web.WebSocketResponse] = set()
        #: the pages told that the server stopped
        self.told = 0

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
        """Serve on the sockets ``listen`` made until SIGINT, SIGTERM or SIGHUP."""
        self.initialize_logging()
        # held while the loop is built: an interrupt there would leave a half-made loop (whose
        # __del__ prints a traceback); held, it reaches the loop's handler and stops it cleanly
        with signals_held():
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(signum, self.request_exit)
        try:
            web.run_app(
                self._make_app(),
                sock=sockets,
                shutdown_timeout=SHUTDOWN_S,
                handle_signals=False,
                loop=loop,
                print=lambda *args: None,
            )
        finally:
            for sock in sockets:
                sock.close()
