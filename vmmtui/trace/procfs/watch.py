"""``vmmtui watch -- CMD``: start a command, follow its whole process tree, report when it ends.

vmmtui becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER) so that processes whose parents
exit stay in the tree (re-parented to vmmtui) and their exit codes are known; the tree is followed
until its last process has exited, not only the command. The tree is polled at
``interval`` (default 0.1 s, at least 4 Hz). The exit code is the command's (128 + N for a signal).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator

from vmmtui.stream.events import Event, Notice, WatchFinished
from vmmtui.trace.command import CommandNotFound, Exit
from vmmtui.trace.procfs.follow import Follower
from vmmtui.trace.procfs.leaks import leftover_files
from vmmtui.trace.procfs.scan import children

PR_SET_CHILD_SUBREAPER = 36


class Watch:
    """One watched command; iterate ``events()``; ``exit`` holds how the command ended."""

    def __init__(
        self,
        command: list[str],
        interval: float = 0.1,
        nvml: bool = True,
        stdout: int | None = None,
    ) -> None:
        self.command, self.interval = command, min(interval, 0.25)
        self.stdout = stdout  # the command's stdout (2 under --json: vmmtui's stdout is the stream)
        self.use_nvml = nvml
        self.exit: Exit | None = None
        self.proc: subprocess.Popen | None = None
        self.follower: Follower | None = None
        self.started_wall = time.time()
        self.children_left = (
            True  # False once waitpid says no child (nor orphan of the tree) is left
        )
        self.stop = False  # a second signal after the command exited: stop following the rest
        self.signals_after_exit = 0

    def start(self) -> None:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        try:
            self.proc = subprocess.Popen(self.command, stdout=self.stdout)
        except FileNotFoundError:
            raise CommandNotFound(f"command not found: {self.command[0]}", 127) from None
        except PermissionError:
            exe = self.command[0]  # EACCES also comes from a PATH folder this user cannot search
            if "/" not in exe and shutil.which(exe) is None:
                raise CommandNotFound(f"command not found: {exe}", 127) from None
            raise CommandNotFound(f"permission denied: {exe} is not executable", 126) from None
        except OSError as exc:
            raise CommandNotFound(f"cannot run {self.command[0]}: {exc.strerror}", 126) from None
        self.follower = Follower(
            {self.proc.pid}, tree=True, use_nvml=self.use_nvml, interval=self.interval
        )

    def _reap(self) -> None:
        assert self.proc is not None and self.follower is not None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children_left = False  # as subreaper, every orphan of the tree is ours
                return
            if pid == 0:
                return
            ex = Exit.of_status(status)
            self.follower.tracker.returncodes[pid] = (ex.code, ex.signal)
            if pid not in self.follower.tracker.names:
                how = f"killed by {ex.signal}" if ex.signal else f"exit code {ex.code}"
                self.follower.never_seen[pid] = how
            if pid == self.proc.pid:
                self.exit = ex
                self.proc.returncode = ex.status  # Popen must not wait for it again

    def forward(self, signum: int) -> None:
        """Pass a signal vmmtui received on to the command (a terminal's ^C reaches both anyway);
        once the command has exited, to the processes of its tree still running, and a second one
        then stops the following (the report says who was left)."""
        if self.proc is not None and self.exit is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signum)
            return
        if self.follower is not None:
            self.signals_after_exit += 1
            self.stop = self.signals_after_exit > 1
            for pid in list(self.follower.tracker.alive):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signum)

    def events(self, on_poll: Callable[[], None] | None = None) -> Iterator[Event]:
        """Events until the command and every process of its tree have exited: as subreaper vmmtui
        gets every orphan of the tree, so no child left (waitpid) means none is running."""
        assert self.follower is not None
        f = self.follower
        me = os.getpid()
        while True:
            self._reap()
            f.targets.update(children(me))  # orphans re-parented to vmmtui before a poll saw them
            yield from f.poll()
            if on_poll:
                on_poll()
            if self.exit is not None and (not self.children_left or self.stop):
                break
            time.sleep(self.interval)
        if self.stop and f.tracker.alive:
            left = ", ".join(map(str, sorted(f.tracker.alive)))
            text = f"stopped following on a second signal; still running: {left}"
            f.unseen.append(text)
            yield Notice(text)
        yield from f.poll()
        self._reap()
        yield from f.snapshots()
        live = {s.path for s in f.last.sockets.sockets.values()} if f.last else set()
        for leak in leftover_files(self.started_wall, f.bound_paths, live, time.monotonic() - f.t0):
            f.all_leaks.append(leak)
            yield leak
        yield from f.missed()
        shares = len(f.tracker.shared_said)
        exit_ = self.exit or Exit(None, None)
        yield WatchFinished(
            self.command,
            exit_.code,
            exit_.signal,
            len(f.tracker.names),
            shares,
            len([x for x in f.all_leaks if not x.kind.startswith("possible-")]),
            round(time.monotonic() - f.t0, 3),
            list(f.unseen),
        )
        f.close()
