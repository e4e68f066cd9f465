"""What a scenario's hooks may do to a running session (the ``Stage`` of vmmtui.scenarios).

Signals to workers, and helper processes (an intruder, a dead listener) that the session reaps at
close whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess

from vmmtui.session.processes import WorkerProcess, worker_env
from vmmtui.stream.events import Event, Notice, NoticeCode


class SessionStage:
    def __init__(self, workers: dict[str, WorkerProcess], socket_path: str):
        self.workers = workers
        self.socket_path = socket_path
        #: started with stdout=PIPE (text): each has a stdout to read
        self.helpers: dict[str, subprocess.Popen[str]] = {}

    def env(self) -> dict[str, str]:
        return worker_env()

    def kill(self, role: str, sig: int, when: str) -> list[Event]:
        w = self.workers[role]
        os.kill(w.pid, sig)
        rc = w.proc.wait(timeout=10)
        return [
            Notice(
                code=NoticeCode.SCENARIO_KILLED,
                facts={
                    "role": w.role,
                    "pid": w.pid,
                    "signal": signal.Signals(sig).name,
                    "when": when,
                },
            ),
            w.mark_killed(rc),
        ]

    def pid(self, role: str) -> int | None:
        w = self.workers.get(role)
        return w.pid if w is not None and w.alive else None

    def quit(self, role: str, when: str) -> list[Event]:
        """Ask a worker to exit as a program that is done would (its control channel says quit)."""
        w = self.workers[role]
        exited = w.stop(grace=10)
        facts: dict[str, str | int] = {"role": w.role, "pid": w.pid, "when": when}
        events: list[Event] = [Notice(code=NoticeCode.SCENARIO_EXITED, facts=facts)]
        return events + ([exited] if exited is not None else [])

    def freeze(self, role: str) -> list[Event]:
        w = self.workers[role]
        os.kill(w.pid, signal.SIGSTOP)
        w.frozen = True
        facts: dict[str, str | int] = {"role": w.role, "pid": w.pid}
        return [Notice(code=NoticeCode.SCENARIO_FROZEN, facts=facts)]

    def start_helper(self, name: str, argv: list[str]) -> None:
        self.helpers[name] = subprocess.Popen(
            argv,
            env=self.env(),
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def helper_line(self, name: str, timeout: float) -> dict:
        proc = self.helpers.get(name)
        if proc is None or proc.stdout is None:
            return {"event": "no such helper"}
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        try:
            return json.loads(line) if line else {"event": "no answer"}
        except ValueError:
            return {"event": "noise", "line": line[:80]}

    def stop_helper(self, name: str) -> None:
        proc = self.helpers.pop(name, None)
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def close(self) -> None:
        for name in list(self.helpers):
            self.stop_helper(name)
