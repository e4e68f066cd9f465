"""The private directory that holds a session's socket, and the sweep of dead runs' directories.

The socket path must fit AF_UNIX (107 bytes) and live in a directory nobody else can swap: a
TMPDIR that is too long falls back to a short private directory (and says so); a world-writable
TMPDIR without the sticky bit is refused, since another user could replace our directory there.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import tempfile

from vmmtui.system.interrupts import signals_held
from vmmtui.wire.channel import AF_UNIX_PATH_MAX

DIR_PREFIX = "vmmtui-"
SOCKET_NAME = "vmmtui.sock"
#: the directory name private_dir_name makes, as long as it can be
_PROBE = f"{DIR_PREFIX}{'9' * 7}-xxxxxxxx"


class TmpdirError(Exception):
    """No safe place for the socket; the message is one line with the fix."""


def fits(tmpdir: str) -> bool:
    return len(os.fsencode(os.path.join(tmpdir, _PROBE, SOCKET_NAME))) <= AF_UNIX_PATH_MAX


def unsafe(tmpdir: str) -> str | None:
    """Why ``tmpdir`` is not a safe parent for a private directory, or None."""
    try:
        st = os.stat(tmpdir)
    except OSError as exc:
        return f"TMPDIR {tmpdir} cannot be used: {exc.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"TMPDIR {tmpdir} is not a directory"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return (
            f"TMPDIR {tmpdir} is writable by every user without the sticky bit, so another user could "
            f"replace the session directory: chmod +t {tmpdir}, or set TMPDIR to a private directory"
        )
    return None


def choose_parent(tmpdir: str | None) -> tuple[str, str | None]:
    """The directory to make the session directory in, and a note when it is not TMPDIR itself."""
    if not tmpdir:
        with signals_held():  # the first call writes and unlinks a test file: not to be cut between
            tmpdir = tempfile.gettempdir()
    wanted = tmpdir
    problem = unsafe(wanted)
    if problem:
        raise TmpdirError(problem)
    if fits(wanted):
        return wanted, None
    for short in (os.environ.get("XDG_RUNTIME_DIR"), "/tmp", "/dev/shm"):
        if short and fits(short) and not unsafe(short) and os.access(short, os.W_OK | os.X_OK):
            return short, (
                f"TMPDIR {wanted} is too long for a socket path (AF_UNIX allows "
                f"{AF_UNIX_PATH_MAX} bytes): the session directory is in {short} instead"
            )
    raise TmpdirError(
        f"TMPDIR {wanted} is too long for a socket path (AF_UNIX allows {AF_UNIX_PATH_MAX} "
        "bytes) and no short private place was found: set TMPDIR to a shorter directory"
    )


def private_dir_name(parent: str) -> str:
    """A fresh name for this session's directory in ``parent``, not made yet.

    ``vmmtui-<pid>-<random>``: the sweep and the producer's reaper read the pid from it. The
    directory itself is made once the producer runs (make_private_dir): from then on the
    producer's reaper removes it by this name should the session be killed at any moment."""
    while True:
        path = os.path.join(parent, f"{DIR_PREFIX}{os.getpid()}-{secrets.token_hex(4)}")
        if not os.path.lexists(path):
            return path


def make_private_dir(path: str) -> None:
    """Make ``path`` 0700; an entry already there (another user's race) is refused, not reused."""
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise TmpdirError(
            f"cannot make the session directory {path}: {exc.strerror}; check TMPDIR"
        ) from None
    os.chmod(path, 0o700)  # whatever the umask


def sweep_stale_dirs(parent: str) -> list[str]:
    """Remove our session directories whose process is dead; only real directories we own.

    A symlink or another user's entry with our prefix is left alone (and not reported as removed).
    """
    removed: list[str] = []
    try:
        names = os.listdir(parent)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(DIR_PREFIX):
            continue
        pid = name[len(DIR_PREFIX) :].split("-", 1)[0]
        path = os.path.join(parent, name)
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            st = os.lstat(path)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.lexists(path):
                removed.append(path)
        except OSError:
            continue
    return removed
