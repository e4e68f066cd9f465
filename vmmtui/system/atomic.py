"""Files whole or not at all: every file vmmtui writes for a user (a recording, a transcript, a
Perfetto trace, a cast, a page, a bench result) is written to a temporary file in the same
directory and renamed over its name once complete, so that a full disk, a removed device or a
kill never leaves a file that looks whole and is not. The rename is atomic within one file system
(rename(2)); the data is flushed and fsync'd first, so that the name never points at blocks not
yet written.

``AtomicFile`` is the one way: ``file`` to write to, ``commit()`` to put it in place, ``abort()``
to leave nothing. ``write_whole(path, data)`` for what is made in one go. A name that is not a
regular file (``/dev/stdout``, a FIFO, ``/dev/full``) is written in place: there is nothing to
rename over a device. A symbolic link is followed: the file it names is replaced, the link kept.
(A recording is the one file written under its name as it goes: it says itself where it is cut,
``record.recording``.)
"""

from __future__ import annotations

import contextlib
import gzip
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Any


class AtomicFile:
    """``path`` written whole: the writes go to a hidden temporary file beside it until
    ``commit()``. ``text``: a text file (UTF-8); ``compress``: gzip (``.gz``)."""

    def __init__(self, path: str | Path, *, text: bool = True, compress: bool = False) -> None:
        self.path = Path(path)
        #: the temporary file (None: written in place, the name is not a regular file)
        self.tmp: Path | None = None
        if _in_place(self.path):
            raw = open(self.path, "wb")  # noqa: SIM115 - closed by commit or abort
        else:
            real = Path(os.path.realpath(self.path))  # a link's file is replaced, the link kept
            self.path = real
            fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".part", dir=real.parent)
            self.tmp = Path(tmp)
            try:
                os.fchmod(fd, 0o666 & ~_umask())  # as open() would have made it
                raw = os.fdopen(fd, "wb")
            except BaseException:
                os.close(fd)
                self.tmp.unlink(missing_ok=True)
                raise
        self._raw = raw
        inner: Any = gzip.GzipFile(fileobj=raw, mode="wb", filename="") if compress else raw
        self._gzip = inner if compress else None
        self.file: IO[Any] = (
            _TextOver(inner) if text else inner  # type: ignore[assignment]
        )
        self.done = False

    def _close(self) -> None:
        """Flush and close every layer, the data on the disk (OSError when it cannot be)."""
        try:
            self.file.flush()
            if self._gzip is not None:
                self._gzip.close()
            self._raw.flush()
            if self.tmp is not None:
                os.fsync(self._raw.fileno())
        finally:
            with contextlib.suppress(OSError, ValueError):
                self._raw.close()

    def commit(self) -> None:
        """Put the complete file in place; OSError (and nothing in place) when it cannot be."""
        if self.done:
            return
        self.done = True
        try:
            self._close()
            if self.tmp is not None:
                os.replace(self.tmp, self.path)
        except BaseException:
            if self.tmp is not None:
                self.tmp.unlink(missing_ok=True)
            raise

    def abort(self) -> None:
        """Leave nothing: the temporary file goes, the name is untouched."""
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError, ValueError):
            self._raw.close()
        if self.tmp is not None:
            self.tmp.unlink(missing_ok=True)


def _in_place(path: Path) -> bool:
    """Whether ``path`` names something other than a regular file (a device, a FIFO): written in
    place, not replaced."""
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return False
    except OSError:
        return False


class _TextOver:
    """UTF-8 text over a binary file, with no buffer of its own (each write goes down at once,
    so that a failing write fails where it is made)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def write(self, s: str) -> int:
        self.raw.write(s.encode("utf-8"))
        return len(s)

    def flush(self) -> None:
        self.raw.flush()

    @property
    def closed(self) -> bool:
        return bool(self.raw.closed)


def _umask() -> int:
    """This process's umask, as the kernel says it (os.umask would change it, for every thread,
    for a moment)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_whole(path: str | Path, data: str | bytes) -> None:
    """``data`` in ``path``, whole, or OSError and nothing there (the old file, if any, kept)."""
    out = AtomicFile(path, text=isinstance(data, str))
    try:
        out.file.write(data)
    except BaseException:
        out.abort()
        raise
    out.commit()
