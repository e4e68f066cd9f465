"""``vmmtui watch -- CMD``: start a command, follow its whole process tree, report when it ends.

vmmtui becomes a child subreaper (prctl PR_SET_CHILD_SUBREAPER) so that processes whose parents
exit stay in the tree (re-parented to vmmtui) and their exit codes are known; the tree is followed
until its last process has exited, not only the command. The tree is polled at
``interval`` (default 0.1 s, at least 4 Hz). The exit code is the command's (128 + N for a signal).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator

from vmmtui.stream.events import Event, Notice, WatchFinished
from vmmtui.trace.command import STOP_SIGNALS, Command, Exit, killed_words
from vmmtui.trace.output import Output
from vmmtui.trace.procfs.follow import Follower
from vmmtui.trace.procfs.leaks import leftover_files
from vmmtui.trace.procfs.scan import children


class Watch:
    """One watched command; iterate ``events()``; ``exit`` holds how the command ended."""

    def __init__(
        self,
        command: list[str],
        interval: float = 0.1,
        nvml: bool = True,
        stdout: int | Output | None = None,
    ) -> None:
        self.command, self.interval = command, min(interval, 0.25)
        self.stdout = stdout  # the command's stdout (2 under --json: vmmtui's stdout is the stream)
        self.use_nvml = nvml
        self.exit: Exit | None = None
        self.proc: subprocess.Popen | None = None
        #: the command's process tree: tied to our life, ended at the end
        self.tree = Command(command, stdout=stdout)
        self.follower: Follower | None = None
        self.started_wall = time.time()
        self.children_left = (
            True  # False once waitpid says no child (nor orphan of the tree) is left
        )
        self.stop = False  # a second signal after the command exited: stop following the rest
        self.signals_after_exit = 0
        #: pids SIGKILLed because they outlived a stop signal's grace, or on a second one
        self.killed: set[int] = set()

    def start(self) -> None:
        """Start the command (``vmmtui.trace.command.CommandNotFound``: 127/126, one line)."""
        self.proc = self.tree.start()
        self.follower = Follower(
            {self.proc.pid},
            tree=True,
            use_nvml=self.use_nvml,
            interval=self.interval,
            attached=False,
        )

    def _reap(self) -> None:
        assert self.proc is not None and self.follower is not None
        if killed := self.tree.enforce():  # a stop signal it ignored: its grace is over
            self.killed |= killed
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children_left = False  # as subreaper, every orphan of the tree is ours
                return
            if pid == 0:
                return
            ex = Exit.of(status)
            self.follower.tracker.returncodes[pid] = (ex.code, ex.signal)
            if pid not in self.follower.tracker.names:
                how = f"killed by {ex.signal}" if ex.signal else f"exit code {ex.code}"
                self.follower.never_seen[pid] = how
            if self.tree.reaped(pid, status):
                self.exit = ex

    def forward(self, signum: int) -> None:
        """Pass a signal vmmtui received on to the command (a terminal's ^C reaches both anyway);
        once the command has exited, to the processes of its tree still running. A stop signal
        the tree ignores becomes SIGKILL after a grace, and at once on a second one, which also
        stops the following (the report says whom it killed)."""
        self.tree.forward(signum)
        if self.exit is not None and signum in STOP_SIGNALS:
            self.signals_after_exit += 1
            if self.signals_after_exit > 1:
                self.stop = True
                self.killed |= self.tree.kill()

    def close(self) -> None:
        """The end: what still runs of the tree is ended (as on q), the guard let go."""
        self.tree.close()

    def events(self, on_poll: Callable[[], None] | None = None) -> Iterator[Event]:
        """Events until the command and every process of its tree have exited: as subreaper vmmtui
        gets every orphan of the tree, so no child left (waitpid) means none is running."""
        assert self.follower is not None
        f = self.follower
        me = os.getpid()
        while True:
            self._reap()
            orphans = children(me)  # orphans re-parented to vmmtui before a poll saw them
            f.tracker.discovered.update(orphans)
            f.targets.update(orphans)
            yield from f.poll()
            if on_poll:
                on_poll()
            if self.exit is not None and (not self.children_left or self.stop):
                break
            time.sleep(self.interval)
        if self.killed:
            text = killed_words(self.killed)
            f.unseen.append(text)
            yield Notice(text)
        yield from f.poll()
        self._reap()
        yield from f.snapshots()
        live = {s.path for s in f.last.sockets.sockets.values()} if f.last else set()
        at = time.monotonic() - f.t0
        for leak in leftover_files(self.started_wall, f.bound_paths, live, at, f.followed):
            f.all_leaks.append(leak)
            yield leak
        yield from f.strangers()
        yield from f.missed()
        shares = len(f.tracker.shared_said)
        exit_ = self.exit or Exit(None, None)
        self.close()
        yield WatchFinished(
            self.command,
            exit_.code,
            exit_.signal,
            len(f.tracker.names),
            shares,
            len(f.all_leaks),
            round(time.monotonic() - f.t0, 3),
            list(f.unseen),
        )
        f.close()
