"""A recording written: the header, then each event as one JSON line, as the events come, every
one of them, to disk (compressed where the name ends in ``.gz``), so that a recorder holds a
buffer's worth, not the run. Read back by ``record.recording.read``."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vmmtui.stream.codec import encode
from vmmtui.stream.events import Event, FdSnapshot, KcmpVerdict

if TYPE_CHECKING:
    from vmmtui.record.recording import Header

#: seconds between flushes of a recording written event by event: what a kill leaves is at most
#: this old, and a flood pays one write a fraction of a second, not one an event
FLUSH_S = 0.25
#: lines written to the file together, at most (about 0.3 MB): the memory a recorder holds
BATCH = 1024


class _Sink:
    """The recording's bytes on their way to disk, compressed where its name ends in ``.gz``.

    Written under its name as the events come (``whole`` False: what the CLI's ``--record`` asks
    for; a recorder killed or a disk that fills leaves a recording cut there, which its reader
    replays up to its cut and says so), or (``whole`` True: ``tracing()`` and the pytest plugin)
    into a file with no name (``O_TMPFILE``) that is linked under its name once whole, so that a
    kill -9 leaves nothing: the kernel frees a file no name points to. Where the file system has
    no ``O_TMPFILE`` it is written as ``NAME.part`` and renamed (a kill leaves the ``.part``)."""

    def __init__(self, path: Path, whole: bool) -> None:
        self.path = path
        self.whole = whole
        self.part: Path | None = None
        self.fd = -1
        if whole:
            try:
                self.fd = os.open(path.parent, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o644)
            except (OSError, AttributeError):  # no O_TMPFILE here: a .part, renamed when whole
                self.part = path.with_name(path.name + ".part")
                self.fd = os.open(
                    self.part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644
                )
        else:
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        self.raw = io.BufferedWriter(io.FileIO(self.fd, "wb", closefd=False), 1 << 16)
        self.out: io.BufferedIOBase = (
            gzip.GzipFile(filename="", fileobj=self.raw, mode="wb", compresslevel=6, mtime=0)
            if path.name.endswith(".gz")
            else self.raw
        )

    def write(self, data: bytes) -> None:
        self.out.write(data)

    def flush(self) -> None:
        self.out.flush()  # gzip: a sync flush, every byte so far decompressible
        if self.out is not self.raw:
            self.raw.flush()

    def close(self, keep: bool) -> None:
        """Finish the file; when ``whole``, give it its name if ``keep`` (else it is dropped)."""
        try:
            if keep:
                if self.out is not self.raw:
                    self.out.close()  # the gzip trailer
                self.raw.flush()
                if self.whole and self.part is None:
                    self._link()
                elif self.part is not None:
                    os.replace(self.part, self.path)
                    self.part = None
        finally:
            with contextlib.suppress(OSError):
                self.raw.close()
            with contextlib.suppress(OSError):
                os.close(self.fd)
            if self.part is not None:
                with contextlib.suppress(OSError):
                    self.part.unlink()

    def _link(self) -> None:
        """The nameless file given a name of its own beside ``path``, then renamed onto it
        (linkat cannot replace a file that is there): linked where the kernel lets us (linkat of
        the fd itself, or of its /proc link), else copied whole into that name."""
        import secrets

        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        if not _linked(self.fd, tmp):
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            try:
                size, at = os.fstat(self.fd).st_size, 0
                while at < size:
                    n = os.copy_file_range(self.fd, out, size - at, at, at)
                    if n == 0:
                        raise OSError(errno.EIO, "the recording could not be copied whole")
                    at += n
            except OSError:
                os.close(out)
                with contextlib.suppress(OSError):
                    tmp.unlink()
                raise
            os.close(out)
        try:
            os.replace(tmp, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise


def _linked(fd: int, name: Path) -> bool:
    """Whether the file open at ``fd`` (``O_TMPFILE``) was linked at ``name``: linkat(2) with
    AT_EMPTY_PATH (CAP_DAC_READ_SEARCH, or kernel 6.10 for a file this process opened), else
    with AT_SYMLINK_FOLLOW of /proc/self/fd/N (refused where /proc is another mount)."""
    import ctypes

    at_fdcwd, at_empty_path = -100, 0x1000
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.linkat(fd, b"", at_fdcwd, os.fsencode(name), at_empty_path) == 0:
            return True
    except (OSError, AttributeError):
        pass
    try:
        os.link(f"/proc/self/fd/{fd}", name, follow_symlinks=True)
    except OSError:
        return False
    return True


class Recorder:
    """Writes the header, then each event as one JSON line, leaving out fd tables and kcmp verdicts
    that repeat the last one kept (the live refresh reads the same table many times). Every event
    is kept, however many: the lines go to disk as they come (flushed every ``FLUSH_S``), so the
    recorder holds a buffer's worth, not the run."""

    def __init__(
        self,
        path: str | Path,
        header: Header,
        line: Callable[[Event], str] | None = None,
        *,
        whole: bool = False,
        on_fail: Callable[[str], object] | None = None,
    ):
        """``line`` writes one event as its JSON line (``Event.to_json`` unless given): a trace
        gives the one that adds a finding's words for readers of the file (storage has none).
        ``whole``: the file is under its name only once it is whole (``_Sink``). ``on_fail``:
        called once, at once, with the sentence when writing fails (a full disk), so that the
        command says where its recording stops when it stops, not at its end."""
        self.path = Path(path)
        self.line = line or Event.to_json
        self.on_fail = on_fail
        self.sink = _Sink(self.path, whole)
        self.closed = False
        self.last: dict[tuple[str, str], Any] = {}
        self.written = 0
        self.skipped = 0
        #: the lines not yet handed to the file (at most BATCH: written together)
        self.pending: list[str] = []
        #: the events known to be on disk (flushed without an error)
        self.flushed = 0
        self.flushed_at = time.monotonic()
        #: why writing stopped (a full disk, a removed device): one sentence; "" while it writes
        self.failed = ""
        try:
            self.sink.write((header.to_json() + "\n").encode())
        except OSError as exc:
            self._fail(exc)

    def write(self, event: Event) -> None:
        if self.failed:
            self.skipped += 1
            return
        key = self._key(event)
        if key is not None:
            body = encode(event)
            if self.last.get(key) == body:
                self.skipped += 1
                return
            self.last[key] = body
        self.pending.append(self.line(event))
        self.written += 1
        if len(self.pending) >= BATCH or time.monotonic() - self.flushed_at >= FLUSH_S:
            self.flush()

    def write_all(self, events: list[Event]) -> None:
        for e in events:
            self.write(e)
        self.flush()

    def _write_pending(self) -> None:
        """The lines waiting, to the file (compressed) in one write: one call into zlib a batch,
        not one a line (which cost more than the line's JSON)."""
        if self.pending:
            self.pending.append("")
            data = "\n".join(self.pending).encode()
            self.pending = []
            self.sink.write(data)

    def flush(self) -> None:
        if self.failed or self.closed:
            return
        try:
            self._write_pending()
            self.sink.flush()
        except OSError as exc:
            self._fail(exc)
            return
        self.flushed = self.written
        self.flushed_at = time.monotonic()

    def _fail(self, exc: OSError) -> None:
        """Writing failed: stop, put what was written in place as a recording cut there, say so
        once (no traceback, no retry), at once where the caller asked (``on_fail``); the command
        then exits non-zero."""
        if self.failed:
            return
        where = (
            f"it stops after its first {self.flushed} events"
            if self.flushed
            else "it stops before its first event"
        )
        self.failed = (
            f"cannot write the recording {self.path}: {exc.strerror or exc}; {where}"
            + (
                " and is not kept"
                if self.sink.whole
                else f" (`vmmtui replay {self.path}` shows what reached it and says where "
                "it is cut)"
            )
            + "; free space there, or record to another file system"
        )
        self.closed = True
        with contextlib.suppress(OSError):
            self.sink.close(keep=not self.sink.whole)  # the buffer that failed is dropped
        if self.on_fail is not None:
            self.on_fail(self.failed)

    @staticmethod
    def _key(event: Event) -> tuple[str, str] | None:
        if isinstance(event, FdSnapshot):
            return ("fds", event.role)
        if isinstance(event, KcmpVerdict):
            return ("kcmp", event.consumer)
        return None

    def close(self, keep: bool = True) -> None:
        """The recording complete (under its name), or cut (``failed`` says so); ``keep`` False:
        a ``whole`` recording is dropped, never named."""
        if self.closed:
            return
        try:
            self._write_pending()
        except OSError as exc:
            self._fail(exc)
            return
        self.closed = True
        try:
            self.sink.close(keep)
        except OSError as exc:  # the last buffer could not be written (a full disk)
            self.closed = False
            self._fail(exc)
