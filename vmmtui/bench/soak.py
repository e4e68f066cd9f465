"""Many sessions in a row from one process: whatever a session leaks shows up here.

After each session the process's fd count, child processes and session directories must be back
where they started, and its resident memory must stop growing once warmed up. Only this
process's own session directories (``vmmtui-<our pid>-*``) are counted: other programs come and
go in TMPDIR.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import psutil

from vmmtui.backends import Choice
from vmmtui.plan.config import SessionConfig
from vmmtui.session import Session
from vmmtui.session.tmpdir import DIR_PREFIX, TmpdirError, choose_parent

WARMUP = 10  # sessions before the memory baseline: imports and caches settle first
RSS_SLACK = 8 << 20  # growth allowed after warm-up (allocator noise), far below a per-session leak


@dataclass
class Reading:
    fds: int
    children: int
    #: this process's session directories (``vmmtui-<pid>-*``) in the sessions' parent directory
    session_dirs: int
    rss: int


@dataclass
class SoakResult:
    backend: str
    count: int
    verified: int
    seconds: float
    start: Reading
    warm: Reading
    end: Reading
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems and self.verified == self.count

    def to_dict(self) -> dict:
        return asdict(self) | {"ok": self.ok}


def session_dirs(parent: str) -> int:
    """How many of this process's session directories are in ``parent``."""
    mine = f"{DIR_PREFIX}{os.getpid()}-"
    try:
        return sum(name.startswith(mine) for name in os.listdir(parent))
    except OSError:
        return 0


def read(parent: str) -> Reading:
    me = psutil.Process()
    return Reading(
        len(os.listdir("/proc/self/fd")),
        len(me.children(recursive=True)),
        session_dirs(parent),
        me.memory_info().rss,
    )


def soak(
    config: SessionConfig,
    count: int,
    progress: Callable[[int, Session], None] | None = None,
    choice: Choice | None = None,
) -> SoakResult:
    try:  # where the sessions make their directories (TMPDIR, or a short one when it is too long)
        tmpdir = choose_parent(config.tmpdir)[0]
    except TmpdirError:
        tmpdir = config.tmpdir or tempfile.gettempdir()  # the first session says why
    start = warm = read(tmpdir)
    verified = 0
    backend = choice.name if choice else config.backend
    t0 = time.monotonic()
    for i in range(count):
        s = Session(config, choice)
        s.lifetime()
        backend = s.choice.name if s.choice else backend
        verified += bool(s.outcome.as_expected if s.outcome else s.verified and s.failure is None)
        if progress:
            progress(i + 1, s)
        if i + 1 == min(WARMUP, count):
            warm = read(tmpdir)
    end = read(tmpdir)
    result = SoakResult(backend, count, verified, time.monotonic() - t0, start, warm, end)
    for name in ("fds", "children", "session_dirs"):
        if getattr(end, name) != getattr(start, name):
            result.problems.append(
                f"{name}: {getattr(start, name)} at the start, {getattr(end, name)} at the end"
            )
    if end.rss - warm.rss > RSS_SLACK:
        result.problems.append(
            f"resident memory grew {(end.rss - warm.rss) >> 10} KiB after {WARMUP} sessions"
        )
    if verified != count:
        result.problems.append(
            f"{count - verified} of {count} sessions did not "
            + ("end as the scenario describes" if config.scenario else "verify")
        )
    return result
