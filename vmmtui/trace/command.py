"""The command that ``trace -- CMD`` and ``watch -- CMD`` start: found, started, ended, and never
left running after vmmtui.

One ``Command`` is the command's whole process tree, not only its first process:

- **found first**: ``resolve`` says "command not found" (127) or "not executable" (126) as ``env``
  and ``timeout`` do, before any screen opens or probe loads;
- **marked**: every process of the tree inherits ``VMMTUI_TREE=<token>`` in its environment (a
  process that execs with a cleared environment leaves the mark behind, and is found only as a
  descendant);
- **adopted**: vmmtui is a child subreaper (PR_SET_CHILD_SUBREAPER), so a process whose parent
  exits is re-parented to vmmtui, still in the tree, its exit status ours to read;
- **tied to vmmtui's life**: the first process asks the kernel for SIGKILL when vmmtui dies
  (``lifeline``: PR_SET_PDEATHSIG, set before exec, checked against the parent's pid); and a small
  guard process, started before the command in a session of its own, waits on a pipe that only
  vmmtui holds. When vmmtui ends in any way (kill -9, a crash, SIGSTOP then SIGKILL) the kernel
  closes the pipe and the guard SIGKILLs every process that carries the mark. On an orderly end
  vmmtui has already ended the tree, and the guard finds nothing;
- **ended as on q**: ``stop`` sends SIGTERM to the tree, then SIGKILL to what is left after
  ``STOP_GRACE_S``; a stop signal passed on to the command (Ctrl-C, SIGTERM, SIGHUP) becomes
  SIGKILL for the tree after ``SIGNAL_GRACE_S`` if the command ignores it, and at once on a
  second one.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from vmmtui.stream.names import shown
from vmmtui.system.lifeline import die_with_parent, prctl
from vmmtui.trace.output import Output

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
#: the environment variable that marks every process of a command's tree
MARK = "VMMTUI_TREE"
#: ``q`` or vmmtui's end: SIGTERM, then SIGKILL to what is still running after this long
STOP_GRACE_S = 0.8
#: a stop signal passed on to the command: SIGKILL to its tree when it has not ended after this
SIGNAL_GRACE_S = 1.5
#: the signals that ask the command to stop (passed on, then enforced)
STOP_SIGNALS = frozenset(
    getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)
)
#: the gate: /bin/sh waits for vmmtui's line on fd 9, then becomes the command (same pid)
#: (the pipe closed without the line: vmmtui gave up, and the command never runs)
GATE = 'read _ <&9 || exit 125; exec 9<&-; exec "$@"'

#: the guard, run by this interpreter with nothing imported but os, sys and time: it leaves its
#: parent (so that it is nobody's child of vmmtui's), waits until the pipe vmmtui holds is closed,
#: then SIGKILLs every process that carries the mark, until none is left (a fork may race a scan)
GUARD = """
import os, sys, time
mark, fd = ("\\0" + sys.argv[1] + "\\0").encode(), int(sys.argv[2])
if os.fork():
    os._exit(0)
while True:
    try:
        if not os.read(fd, 64):
            break
    except InterruptedError:
        continue
    except OSError:
        break
me, end = os.getpid(), time.monotonic() + 10
while time.monotonic() < end:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                with open("/proc/" + entry + "/environ", "rb") as f:
                    if mark in b"\\0" + f.read():
                        found.append(int(entry))
            except OSError:
                pass
    if not found:
        break
    for pid in found:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    time.sleep(0.05)
"""


class CommandNotFound(Exception):
    """The command could not be started: ``code`` is 127 (not found) or 126 (not executable),
    as a shell, ``env`` and ``timeout`` say it."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Exit:
    """How a process ended: its exit code, or the name of the signal that killed it."""

    code: int | None
    signal: str | None

    @property
    def status(self) -> int:
        """As a shell says it: the code, or 128 + the signal's number."""
        if self.signal:
            return 128 + int(signal.Signals[self.signal])
        return self.code or 0

    @classmethod
    def of(cls, status: int) -> Exit:
        """From a ``waitpid`` status."""
        if os.WIFSIGNALED(status):
            return cls(None, signal.Signals(os.WTERMSIG(status)).name)
        return cls(os.WEXITSTATUS(status), None)


def descendants(pids: set[int]) -> set[int]:
    """``pids`` and every live process below them (read from /proc/*/stat)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            parent[int(entry)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError):
            continue
    out, frontier = set(pids), set(pids)
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier and p not in out}
        out |= frontier
    return out


def marked(token: str) -> set[int]:
    """The live processes whose environment carries ``VMMTUI_TREE=token`` (from /proc/*/environ)."""
    needle = f"\0{MARK}={token}\0".encode()
    out: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in b"\0" + f.read():
                    out.add(int(entry))
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    """Running (a zombie has ended: only its exit status waits to be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def resolve(command: list[str]) -> str:
    """The file ``command[0]`` names, as exec would find it; ``CommandNotFound`` otherwise (one
    line, the name escaped)."""
    exe = command[0] if command else ""
    name = shown(exe)
    if "/" in exe:
        found: str | None = exe if os.path.exists(exe) else None
    else:
        found = shutil.which(exe) if exe else None
    if found is None:
        return _not_found(f"command not found: {name}", 127)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        return _not_found(f"permission denied: {name} is not executable", 126)
    return found


def _not_found(message: str, code: int) -> str:
    raise CommandNotFound(message, code)


def subreaper(on: bool) -> bool:
    """Set whether orphans of our descendants come to us; returns what it was."""
    was = _subreaper_now()
    prctl(PR_SET_CHILD_SUBREAPER, int(on))
    return was


def _subreaper_now() -> bool:
    value = ctypes.c_int(0)
    prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value))
    return bool(value.value)


def killed_words(pids: set[int]) -> str:
    """The one line for processes of the tree that outlived a stop signal and were SIGKILLed."""
    return (
        f"killed (SIGKILL) {len(pids)} process{'es' if len(pids) != 1 else ''} of the command's "
        f"tree that outlived the stop signal: {', '.join(map(str, sorted(pids)))}"
    )


class Command:
    """One command's process tree; ``start`` it, ``forward`` signals, ``enforce`` from the loop
    that follows it, ``close`` at the end (ends what is left, lets the guard go)."""

    def __init__(
        self,
        argv: list[str],
        *,
        gate: bool = False,
        stdin: int | None = None,
        stdout: int | Output | None = None,
        stderr: int | None = None,
    ) -> None:
        """``stdout``: an fd, None (vmmtui's), or an ``Output`` that captures stdout and stderr
        (stdin then is /dev/null: the keyboard is the inspector's)."""
        self.argv = list(argv)
        self.gate = gate  # held before exec until ``release`` (the tracer follows its pid first)
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.token = f"{os.getpid()}-{secrets.token_hex(8)}"
        self.proc: subprocess.Popen | None = None
        self.exit: Exit | None = None
        #: when (monotonic) the tree gets SIGKILL, after a stop signal it did not obey
        self.kill_at: float | None = None
        self.stop_signals = 0
        self._guard_w: int | None = None
        self._was_subreaper: bool | None = None
        self._gate_w: int | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> subprocess.Popen:
        """Find the command (``CommandNotFound``), start the guard, become subreaper, start it."""
        resolve(self.argv)
        self._start_guard()
        self._was_subreaper = subreaper(True)
        parent = os.getpid()
        gate_r = -1
        if self.gate:
            gate_r, self._gate_w = os.pipe()

        def child() -> None:  # after fork, before exec: no allocation-heavy work, no dlopen
            if gate_r >= 0:
                os.dup2(gate_r, 9)  # dash reads only fds 0-9
            if not die_with_parent(parent):
                os._exit(1)  # vmmtui died before we asked: nothing to trace for

        argv = ["/bin/sh", "-c", GATE, "vmmtui-trace", *self.argv] if self.gate else self.argv
        stdin, stdout, stderr = self.stdin, self.stdout, self.stderr
        if isinstance(stdout, Output):
            stdout, stderr = stdout.child_fds()
            stdin = subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(9,) if self.gate else (),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                env={**os.environ, MARK: self.token},
                preexec_fn=child,
            )
        except OSError as exc:
            self.close()
            raise CommandNotFound(
                f"cannot run {shown(self.argv[0])}: {exc.strerror or exc}", 126
            ) from None
        finally:
            if gate_r >= 0:
                os.close(gate_r)
        if isinstance(self.stdout, Output):
            self.stdout.started()
        return self.proc

    def release(self) -> None:
        """Let the gated command exec (its pid is followed by now)."""
        if self._gate_w is not None:
            with contextlib.suppress(OSError):
                os.write(self._gate_w, b"go\n")
            os.close(self._gate_w)
            self._gate_w = None

    def _start_guard(self) -> None:
        """The guard, out of our children before we are a subreaper (its intermediate exits, so
        it goes to init, not to us), in a session of its own (a terminal's ^C is not for it)."""
        r, w = os.pipe()
        was = subreaper(False)
        try:
            intermediate = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", GUARD, f"{MARK}={self.token}", str(r)],
                pass_fds=(r,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            intermediate.wait()
        except OSError:
            os.close(w)  # no guard: the lifeline and an orderly end still hold
            w = -1
        finally:
            os.close(r)
            subreaper(was)
        self._guard_w = w if w >= 0 else None

    # -- run -----------------------------------------------------------------------------------
    def reaped(self, pid: int, status: int) -> bool:
        """A ``waitpid`` result: True (and ``exit`` set) when it is the command's first process."""
        if self.proc is None or pid != self.proc.pid:
            return False
        self.exit = Exit.of(status)
        self.proc.returncode = self.exit.status  # Popen must not wait for it again
        return True

    def tree(self) -> set[int]:
        """The live processes of the command's tree: below its first process, and every process
        that carries the mark (orphans re-parented to us or elsewhere), with theirs."""
        roots = marked(self.token)
        if self.proc is not None and self.exit is None and self.proc.returncode is None:
            roots.add(self.proc.pid)  # not once reaped: its pid may be another's by now
        return {p for p in descendants(roots) if alive(p)}

    def forward(self, signum: int) -> None:
        """A signal vmmtui received, passed on: to the command while it runs, else to what is left
        of its tree. A stop signal starts the grace clock; a second one kills the tree now."""
        running = self.proc is not None and self.exit is None
        targets = {self.pid} if running else self.tree()
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        if signum in STOP_SIGNALS:
            self.stop_signals += 1
            if self.stop_signals > 1:
                self.kill_at = time.monotonic()
            elif self.kill_at is None:
                self.kill_at = time.monotonic() + SIGNAL_GRACE_S

    def enforce(self) -> set[int]:
        """From the following loop: SIGKILL the tree when a stop signal's grace has run out;
        returns the pids it killed."""
        if self.kill_at is None or time.monotonic() < self.kill_at:
            return set()
        return self.kill()

    def kill(self) -> set[int]:
        """SIGKILL to every process of the tree, until none is left (one may fork meanwhile)."""
        killed: set[int] = set()
        for _ in range(20):
            left = self.tree()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            killed |= left
            time.sleep(0.01)
        return killed

    def stop(self, grace: float = STOP_GRACE_S) -> set[int]:
        """As on ``q``: SIGTERM to the tree, SIGKILL to what is left after ``grace``; returns the
        pids that were running."""
        tree = self.tree()
        for pid in tree:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and any(alive(p) for p in tree):
            time.sleep(0.02)
        return tree | self.kill()

    def _reap(self, pids: set[int]) -> None:
        """Read the exit status of those of ``pids`` that were our children (the first process,
        orphans we adopted): none is left a zombie of ours."""
        for pid in pids:
            with contextlib.suppress(ChildProcessError, OSError):
                got, status = os.waitpid(pid, os.WNOHANG)
                if got == pid:
                    self.reaped(pid, status)

    def close(self) -> None:
        """The end of following: whatever of the tree still runs is stopped, the gate and the
        guard are let go (the guard then finds nothing and exits)."""
        if self._gate_w is not None:  # never released: the gate exits, the command never runs
            os.close(self._gate_w)
            self._gate_w = None
        if self.proc is not None:
            self._reap(self.stop())
        if isinstance(self.stdout, Output):  # the tree has ended: the last of its output
            self.stdout.finish()
        if self._was_subreaper is not None:  # as it was: orphans of others go where they went
            subreaper(self._was_subreaper)
            self._was_subreaper = None
        if self._guard_w is not None:
            os.close(self._guard_w)
            self._guard_w = None
