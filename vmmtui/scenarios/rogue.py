"""Processes that misbehave on purpose, for the scenarios: an intruder and a dead run's socket.

``python -m vmmtui.scenarios.rogue intruder PATH`` connects to the producer's socket before the consumer
does and reports on stdout (JSON lines) whether it connected and how many fds it received.
``python -m vmmtui.scenarios.rogue dead-listener PATH`` binds PATH, listens and kills itself, leaving the
socket file behind exactly as a crashed producer would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time


def _say(**fields) -> None:
    print(json.dumps(fields), flush=True)


def intruder(path: str, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(path)
            break
        except OSError as exc:
            sock.close()
            if time.monotonic() > deadline:
                _say(event="gave up", pid=os.getpid(), error=str(exc))
                return 1
            time.sleep(0.02)
    _say(event="connected", pid=os.getpid(), uid=os.getuid())
    sock.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        data, fds, _, _ = socket.recv_fds(sock, 65536, 8)
        result = (
            "end of file: the producer closed the connection"
            if not data and not fds
            else f"{len(data)} bytes"
        )
    except TimeoutError:
        data, fds, result = b"", [], "timed out waiting"
    except OSError as exc:
        data, fds, result = b"", [], f"{type(exc).__name__}: {exc}"
    for fd in fds:
        os.close(fd)
    _say(event="done", pid=os.getpid(), fds_received=len(fds), result=result)
    return 0


def dead_listener(path: str) -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(path)
    sock.listen(1)
    _say(event="bound", pid=os.getpid())
    os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "intruder":
        return intruder(argv[1])
    if len(argv) == 2 and argv[0] == "dead-listener":
        dead_listener(argv[1])
    print("usage: python -m vmmtui.scenarios.rogue intruder|dead-listener PATH", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
