"""A recording: one header line, then the session's event stream as JSON lines (``Event.to_json``).

The events are exactly what ``vmmtui run --json`` prints; the header says which machine, driver,
device, backend and options made them, so a replay needs nothing of the original machine. Fd
tables are kept only when they changed since the last one kept for that worker (the inspector
reads them 4 times a second; most reads repeat the last). ``.gz`` files are read and written
through gzip. No Textual here.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import gzip
import io
import itertools
import json
import os
import platform
import re
import socket
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vmmtui.plan.config import SessionConfig
from vmmtui.record.writer import Recorder  # the writer, re-exported under its old address
from vmmtui.stream import observed as _trace_events  # registers the trace events
from vmmtui.stream.codec import DecodeError, decode, encode
from vmmtui.stream.events import (
    VERSION,
    Event,
    EventFormatError,
    Notice,
    SessionClosed,
    SessionStarted,
    StepDone,
    StepStarted,
)
from vmmtui.stream.failures import Failure
from vmmtui.stream.names import defanged
from vmmtui.system.early import version

#: the recording format: 1 was the bare event stream (``--json``, ``.jsonl`` transcripts), with no
#: header and fd tables read only after each step; 2 adds the header and the fd tables that changed
#: between steps
FORMAT = 2
#: what a recording of an older format lacks, said when it is read
LACKS = {
    1: "format 1 (a bare event stream, as `vmmtui run --json` prints): no header, so the machine, "
    "driver, date and options are unknown, and fd tables only as read after each step",
}
MAGIC = "vmmtui-recording"
#: the longest line a recording may hold: vmmtui's longest event is under 8 KiB (an fd table);
#: a longer line (a gzip bomb's, a file that is not a recording) is refused before it fills memory
MAX_LINE = 256 << 10
#: how many times its size on disk a compressed recording may grow once decompressed, past
#: RATIO_AFTER bytes: vmmtui's compress 8 to 30 times; a bomb's blank or repeated lines, a
#: thousand times
MAX_RATIO = 200
RATIO_AFTER = 16 << 20
#: the note an older recorder wrote when it stopped at its (then) 4 MiB limit; still read, and
#: said as the cut it is
FULL_NOTE = "the recording stops here: it reached its {limit} limit"
#: gzip's first two bytes: a compressed recording is read as one whatever its name
GZIP_MAGIC = b"\x1f\x8b"
#: the deepest nesting of arrays and objects a line may have; events nest 6 deep at most (a deeper
#: value would exhaust the JSON parser's recursion)
MAX_DEPTH = 32
#: a string in JSON (its brackets are not nesting), or one left open at the line's end. Possessive,
#: and every opening quote ends a match, so each character is looked at once: the old pattern went
#: back over the rest of the line from every quote of a string never closed (quadratic)
_JSON_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+(?:"|\\?$)')
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_NESTING = {"[": 1, "{": 1, "]": -1, "}": -1}


class RecordingError(ValueError):
    """The file cannot be replayed; the message is one line naming the file (and the line)."""


@dataclass
class Machine:
    hostname: str = ""
    kernel: str = ""
    cpu: str = ""

    @classmethod
    def here(cls) -> Machine:
        return cls(
            socket.gethostname(),
            f"{platform.system()} {platform.release()} {platform.machine()}",
            cpu_model(),
        )


@dataclass
class Header:
    """Where and how the events were made: enough to say what a replay shows."""

    format: int = FORMAT
    events_version: int = VERSION
    vmmtui_version: str = field(default_factory=version)
    #: ISO 8601 with the UTC offset, when the recording started
    date: str = ""
    machine: Machine = field(default_factory=Machine)
    #: e.g. "CUDA 13.0 (driver API 13000)"; "" on memfd
    driver: str = ""
    #: e.g. "NVIDIA H100 80GB HBM3" or "CPU memory (memfd)"
    device: str = ""
    backend: str = ""
    #: why that backend (the session's one-line reason)
    reason: str = ""
    #: every option of the session (SessionConfig's fields)
    options: dict[str, Any] = field(default_factory=dict)
    #: a short description ("VMM, 1 MiB, producer writes"), for the gallery listing
    title: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {MAGIC: FORMAT, **encode(self)}, ensure_ascii=False, separators=(",", ":")
        )

    @property
    def when(self) -> str:
        """The date as people read it: ``2026-11-22 14:03``."""
        try:
            return datetime.datetime.fromisoformat(self.date).strftime("%Y-%m-%d %H:%M")
        except ValueError:
            return self.date or "unknown date"

    @property
    def where(self) -> str:
        """The machine it was made on, as hardware: ``NVIDIA H100 80GB HBM3 · Intel Xeon host``,
        ``CPU memory (memfd) · AMD EPYC host`` (the backend when the device is unknown). Not the
        host name: a name such as "vm" says nothing of the machine (every gallery recording's)."""
        what = self.device or self.backend or "unknown device"
        cpu = short_cpu(self.machine.cpu)
        return f"{what} · {cpu} host" if cpu else what

    @property
    def label(self) -> str:
        """What it shows, from its options (``describe``): a recording made before a scenario's
        mechanism was named keeps the title it was written with only where the options fail."""
        if self.backend == "trace":  # a program traced: its options are the command, not a plan
            return self.title
        config = self.config()
        return describe(config) if config is not None else self.title

    def config(self) -> SessionConfig | None:
        """The options as a SessionConfig (None when they are missing or from another vmmtui)."""
        try:
            return decode(SessionConfig, self.options)
        except DecodeError:
            return None


def short_cpu(model: str) -> str:
    """``Intel(R) Xeon(R) Processor`` → ``Intel Xeon``: the CPU's make and line, no marks."""
    words = re.sub(r"\((R|TM|tm|r)\)|\bProcessor\b|\bCPU\b|@.*$", " ", model).split()
    return " ".join(words[:4])


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def make_header(
    config: SessionConfig,
    backend: str,
    reason: str,
    driver: str = "",
    device: str = "",
    title: str = "",
) -> Header:
    now = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return Header(
        date=now,
        machine=Machine.here(),
        driver=driver,
        device=device,
        backend=backend,
        reason=reason,
        options=asdict(config),
        title=title,
    )


@functools.cache
def cuda_identity(device: int) -> tuple[str, str]:
    """(driver, device name) from the capability probe (a throw-away process): for the header.
    Cached: the inspector asks before it starts, so that its first recorded event does not wait."""
    from vmmtui.backends.probe import probe

    info = probe()
    name = info.devices[device].name if device < len(info.devices) else ""
    return info.driver_api, name


def describe(config: SessionConfig) -> str:
    """``vmm · 1 MiB · 1 consumer · producer-writes`` (and the scenario): the gallery's one-line title."""
    from vmmtui import scenarios
    from vmmtui.stream.sizes import format_size

    n = config.consumers
    scenario = scenarios.get(config.scenario) if config.scenario else None
    parts = [
        # the mechanism it ran with: a scenario's own (legacy-second-context runs legacy IPC);
        # on memfd the same steps share a memfd, not GPU memory
        "memfd"
        if config.backend == "memfd"
        else str(scenario.mechanism if scenario is not None else config.mechanism),
        format_size(config.size),
        f"{n} consumer{'s' if n > 1 else ''}",
        str(config.direction),
    ]
    if config.transport != "scm-rights":
        parts.append("fd taken by pidfd_getfd")
    if config.devices:
        parts.append("GPUs " + ",".join(map(str, config.devices)))
    if config.scenario:
        parts.append(f"scenario {config.scenario}")
    return " · ".join(parts)


def start_recording(
    path: str | Path,
    config: SessionConfig,
    backend: str,
    reason: str,
    line: Callable[[Event], str] | None = None,
) -> Recorder:
    """A Recorder with this machine's header; RecordingError (one line) when FILE cannot be written.
    ``line``: how an event is written (the caller's ``--json`` line: one format for both)."""
    driver, device = (
        cuda_identity(config.device) if backend == "cuda" else ("", "CPU memory (memfd)")
    )
    header = make_header(config, backend, reason, driver, device, describe(config))
    try:
        return Recorder(path, header, line)
    except OSError as exc:
        raise RecordingError(
            f"cannot write the recording {path}: {exc.strerror or exc}; "
            "choose a writable --record FILE"
        ) from None


@dataclass
class Recording:
    """A recording read back: its header, its events, and what it lacks (older formats)."""

    header: Header
    events: list[Event]
    path: str = ""
    #: a sentence on what an older format lacks; "" for the current one
    note: str = ""
    #: a sentence saying the recording ends before the session did (cut short); "" when whole
    cut: str = ""


def read(path: str | Path) -> Recording:
    """Read a recording (``.jsonl`` or ``.jsonl.gz``); RecordingError with one line when it cannot.

    Read as a stream, a line at a time (compressed or not, whatever its name), however long the
    recording: no line may be longer than MAX_LINE and a compressed one may not grow more than
    MAX_RATIO times its size on disk (a gzip bomb is refused, one line naming where, before it
    fills memory); what is kept is the events, not the file's text.

    Everything in it comes from outside: every string of every line (header included) goes through
    :func:`vmmtui.stream.names.defanged` here, where it enters, so that no field of any event, one added
    later included, reaches a terminal, a page or a Markdown file with a control or bidi character
    in it. Here, not in the codec: the codec also reads our own workers' reports, whose names are
    compared with what /proc says; and not in each renderer, which would each have to remember.

    Storage only: the events as they were written. Whoever replays them runs today's pipeline
    over them (``vmmtui.pipeline.replay``: a trace's findings found again from its calls)."""
    path = Path(path)
    name = str(path)
    try:
        with _Lines(path) as lines:
            return _parse(name, lines)
    except FileNotFoundError:
        raise RecordingError(
            f"{name}: no such file (`vmmtui replay --list` shows the gallery)"
        ) from None
    except IsADirectoryError:
        raise RecordingError(f"{name} is a directory, not a recording") from None
    except PermissionError:
        raise RecordingError(f"{name}: permission denied") from None
    except (OSError, EOFError, zlib.error) as exc:  # gzip: bad magic, truncated stream
        raise RecordingError(
            f"{name} is not a readable recording ({exc}); record one with `vmmtui --record FILE`"
        ) from None
    except UnicodeDecodeError:
        raise RecordingError(
            f"{name} is not a recording (binary data); record one with `vmmtui --record FILE`"
        ) from None


class _Lines:
    """A recording's lines, one at a time, each with its number and whether it is the last; the
    last's ``complete`` says whether the file ended with a newline (a line written in part is
    the last of a recording cut while it was written)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.stack = contextlib.ExitStack()
        self.complete = True

    def __enter__(self) -> _Lines:
        raw: io.BufferedReader = self.stack.enter_context(_open_bytes(self.path))
        self.raw = raw
        self.gzipped = raw.peek(2)[:2] == GZIP_MAGIC
        self.f: io.BufferedIOBase = raw
        if self.gzipped:
            self.f = gzip.GzipFile(fileobj=raw, mode="rb")
            self.stack.callback(self.f.close)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def _next(self, number: int, total: int) -> bytes:
        try:
            line = self.f.readline(MAX_LINE + 1)
        except EOFError:  # a gzip stream that ends early (its recorder killed): what came before
            if not total:
                raise  # nothing before it: not a readable recording
            return b""
        if len(line) > MAX_LINE:
            from vmmtui.stream.sizes import format_size

            raise RecordingError(
                f"{self.path} line {number}: longer than {format_size(MAX_LINE)}"
                f"{' once decompressed' if self.gzipped else ''} (vmmtui's lines are under 8 KiB); "
                "not replayed: is it really a recording?"
            )
        if self.gzipped and total > RATIO_AFTER:
            on_disk = max(self.raw.tell(), 1)
            if total > MAX_RATIO * on_disk:
                raise RecordingError(
                    f"{self.path} line {number}: {total // on_disk} times its size on disk once "
                    f"decompressed (vmmtui's grow under 30 times): a gzip bomb?; not replayed"
                )
        return line

    def __iter__(self) -> Iterator[tuple[int, str, bool]]:
        """(number, text without its newline, whether it is the last line)."""
        number, total = 1, 0
        line = self._next(number, total)
        while line:
            total += len(line)
            after = self._next(number + 1, total)
            last = not after
            if last:
                self.complete = line.endswith(b"\n")
            yield number, line.rstrip(b"\n").decode("utf-8"), last
            number, line = number + 1, after


def _parse(name: str, lines: _Lines) -> Recording:
    header: Header | None = None
    start, note = 2, ""
    events: list[Event] = []
    numbers: list[int] = []
    truncated = 0
    last_line = 0
    for number, line, last in lines:
        last_line = number
        if _too_deep(line):
            raise RecordingError(
                f"{name} line {number}: values nested more than {MAX_DEPTH} deep (vmmtui's "
                "events nest 6 deep); the recording cannot be replayed"
            )
        if number == 1:
            if last and not line.strip():
                break  # a blank line alone: empty
            first = _first_line(name, line)
            if MAGIC in first:
                header = _header(name, first)
                continue
            header, start, note = Header(format=1), 1, LACKS[1]
        if not line.strip():
            continue
        try:
            events.append(_event(line))
            numbers.append(number)
        except EventFormatError as exc:
            if _is_header(line):
                raise RecordingError(
                    f"{name} line {number} is a recording header, which belongs on line 1: its "
                    "lines are out of order (reversed, as `tac` writes them?); replay the file as "
                    "it was recorded"
                ) from None
            if last and not lines.complete:
                truncated = number  # written in part (a full disk, a kill): the rest replays
                break
            raise RecordingError(
                f"{name} line {number}: corrupt: {exc}; the recording cannot be replayed"
            ) from None
    if header is None:
        raise RecordingError(f"{name} is empty: not a recording")
    if not events:
        raise RecordingError(
            f"{name} has a header but no events: the recording was cut before the session started"
        )
    _check_order(name, events, numbers)
    if note == "" and header.format < FORMAT:
        note = LACKS.get(header.format, f"format {header.format}")
    events = [in_our_words(e) for e in events]
    cut = (
        f"cut short: line {truncated} was written in part (the disk filled, or its recorder was "
        f"killed while writing); the replay shows the {len(events)} events before it, and the "
        "rest is missing"
        if truncated
        else _cut(events, max(last_line, start - 1))
    )
    return Recording(header, events, name, note, cut)


def untrusted(data: Any) -> Any:
    """A JSON value read from outside with every string in it (keys too) :func:`defanged`."""
    if isinstance(data, str):
        return defanged(data)
    if isinstance(data, list):
        return [untrusted(v) for v in data]
    if isinstance(data, dict):
        return {defanged(k): untrusted(v) for k, v in data.items()}
    return data


def _event(line: str) -> Event:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise EventFormatError(f"not JSON: {exc}") from None
    return Event.from_dict(untrusted(data))


def _is_header(line: str) -> bool:
    try:
        return MAGIC in json.loads(line)
    except (ValueError, TypeError):
        return False


#: each kind of recording: the event it opens with, the one it ends with. A session's recording
#: may also hold the kernel's record of its workers, a trace inside it (TraceStarted, TraceFinished)
_KINDS = (("SessionStarted", "SessionClosed"), ("TraceStarted", "TraceFinished"))


def _check_order(name: str, events: list[Event], numbers: list[int]) -> None:
    """RecordingError unless the events open with their session's start, once, and name only the
    workers and steps it announced: a replay draws everything from it (the plan, the workers'
    panels), so one without it, with its lines reversed, or naming other workers or more steps
    than its plan cannot be replayed, and says which line."""
    kinds = [type(e).__name__ for e in events]
    start, end = next(((s, e) for s, e in _KINDS if s in kinds), ("", ""))
    if not start:
        raise RecordingError(
            f"{name} has no SessionStarted (or TraceStarted) event: it lacks the session's start, "
            "its plan and workers, so it cannot be replayed; replay the whole recording"
        )
    at = kinds.index(start)
    if end in kinds[:at]:
        raise RecordingError(
            f"{name}: its events are in reverse order (the session ends before it starts, at line "
            f"{numbers[at]}): reversed, as `tac` writes it?; replay the file as it was recorded"
        )
    if start in kinds[at + 1 :]:
        again = kinds.index(start, at + 1)
        raise RecordingError(
            f"{name} line {numbers[again]}: a second {start} (the first is at line "
            f"{numbers[at]}): two sessions in one file cannot be replayed; replay each on its own"
        )
    started = events[at]
    if isinstance(started, SessionStarted):
        _check_workers(name, started, events[at:], numbers[at:])


#: the event fields that name a worker (a panel of the inspector each)
_WORKER_FIELDS = ("role", "consumer")


def _check_workers(
    name: str, started: SessionStarted, events: list[Event], numbers: list[int]
) -> None:
    from vmmtui.plan.config import MAX_CONSUMERS
    from vmmtui.plan.steps import PRODUCER, consumer_names

    made = {PRODUCER, *consumer_names(1), *consumer_names(MAX_CONSUMERS)}
    announced = [*started.consumers, *(role for role, _ in started.plan), *started.devices]
    for role in announced:
        if role not in made:
            raise RecordingError(
                f"{name} line {numbers[0]}: its session names a worker {role!r:.60}, which vmmtui "
                "never starts (producer, consumer, consumer-1 to -8): not a vmmtui recording"
            )
    workers = {PRODUCER, *started.consumers}
    for e, number in zip(events, numbers, strict=True):
        roles = [getattr(e, f) for f in _WORKER_FIELDS if isinstance(getattr(e, f, None), str)]
        # -1: a worker's cleanup, after the plan
        if isinstance(e, StepDone | StepStarted) and not -1 <= e.index < len(started.plan):
            raise RecordingError(
                f"{name} line {number}: step {e.index + 1} of a plan of "
                f"{len(started.plan)} steps: not a vmmtui recording"
            )
        if isinstance(e, StepDone):
            roles.append(e.report.role)
        for role in roles:
            if role and role not in workers:
                raise RecordingError(
                    f"{name} line {number}: {type(e).__name__} names a worker {role!r:.60} that its "
                    f"session did not start ({', '.join(sorted(workers))}): not a vmmtui recording"
                )


def in_our_words(e: Event) -> Event:
    """The event with the words that are vmmtui's own taken out or from today's catalogue, not
    from the recording: a worker's log line no longer quotes a failure's cause and fix (an older
    vmmtui wrote them into it; the failure is worded where it is drawn,
    ``words.troubleshooting.worded``), and a scenario's explanation is its catalogue entry's.
    The facts (codes, calls, messages, numbers) stay as they were recorded; an older FD_LEAK
    that carried its fds only in its sentence gets them back as facts (``_leak_facts``)."""
    from dataclasses import replace

    from vmmtui import scenarios
    from vmmtui.stream.events import Notice, ScenarioOutcome, SessionFailed, StepDone

    def known(name: str) -> scenarios.Scenario | None:
        """The scenario of that name; None for a name this vmmtui does not know."""
        try:
            return scenarios.get(name)
        except KeyError:
            return None

    match e:
        case SessionFailed() if (leak := _leak_facts(e.failure)) is not e.failure:
            return replace(e, failure=leak)
        case StepDone() if (f := e.report.failure) is not None and (f.cause or f.fix):
            log = [  # an older worker's ERROR line: `call: code (message) - cause; fix: fix`
                line.replace(f" - {f.cause}", "", 1).replace(f"; fix: {f.fix}", "", 1)
                for line in e.report.log
            ]
            return replace(e, report=replace(e.report, log=log))
        case ScenarioOutcome() if (scenario := known(e.name)) is not None:
            return replace(e, explanation=scenario.explanation)
        case Notice() if e.text.startswith("scenario "):
            name = e.text.removeprefix("scenario ").split(":", 1)[0]
            scenario = known(name)
            if scenario is not None and e.text.startswith(f"scenario {name}: "):
                return replace(e, text=f"scenario {name}: {scenario.explanation}")
    return e


#: an FD_LEAK's message as vmmtui wrote it before its fds were facts:
#: ``/proc/1985/fd still has fd 38 → /dev/nvidiactl, fd 40 → /memfd:x after cleanup``
_OLD_LEAK = re.compile(r"(/proc/\d+/fd) still has (fd \d+ → .*) after cleanup")
_OLD_LEAKED_FD = re.compile(r"fd (\d+) → (.*?)(?=, fd \d+ → |$)")


def _leak_facts(f: Failure) -> Failure:
    """An FD_LEAK from an older recording, its fds read out of its sentence into ``fds`` and its
    message the table they were read from, as this version writes it (the screen marks the fds
    ✗ from the facts, and the sentence is worded again where it is drawn); any other failure
    as it is."""
    if f.code != "FD_LEAK" or f.fds:
        return f
    old = _OLD_LEAK.fullmatch(f.message)
    if old is None:
        return f
    fds = {int(fd): target for fd, target in _OLD_LEAKED_FD.findall(old.group(2))}
    return Failure(f.code, f.call, old.group(1), f.cause, f.fix, fds=fds)


def _cut(events: list[Event], last_line: int) -> str:
    """Why the recording ends before its session did, or "" when it ends with the session's end."""
    last = events[-1]
    if isinstance(last, SessionClosed):
        return ""
    # a trace's end; in a session's recording, the end of the kernel's record, before the close
    if isinstance(last, _trace_events.TraceFinished) and not any(
        isinstance(e, SessionStarted) for e in events[:50]
    ):
        return ""
    if isinstance(events[-1], Notice) and events[-1].text.startswith(FULL_NOTE[:25]):
        return f"{events[-1].text} (line {last_line}): the session went on, unrecorded"
    return (
        f"cut short: it ends at line {last_line}, before the session's end (its recorder was "
        "stopped or killed); the replay shows what it holds, and the rest is missing"
    )


def _too_deep(line: str) -> bool:
    """Whether ``line`` nests arrays and objects more than MAX_DEPTH deep (strings ignored). Linear
    in the line's length: strings go in one pass, the running depth is summed in C."""
    if line.count("[") + line.count("{") <= MAX_DEPTH:
        return False
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", line))
    return max(itertools.accumulate(map(_NESTING.__getitem__, brackets)), default=0) > MAX_DEPTH


#: what a path that is not a regular file is, by its type (``stat.S_IFMT``)
_NOT_A_FILE = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _open_bytes(path: Path) -> io.BufferedReader:
    """The file, opened without waiting: a FIFO opened for reading would block until a writer came
    (O_NONBLOCK returns at once), and a FIFO, device or socket is refused before a byte is read."""
    kind = _NOT_A_FILE.get(stat.S_IFMT(os.stat(path).st_mode))
    if kind is None:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        mode = os.fstat(fd).st_mode
        kind = _NOT_A_FILE.get(stat.S_IFMT(mode))
        if kind is None:
            if stat.S_ISDIR(mode):
                os.close(fd)
                raise IsADirectoryError(path)
            os.set_blocking(fd, True)
            return open(fd, "rb")  # noqa: SIM115 - the caller closes it
        os.close(fd)
    raise RecordingError(
        f"{path} is {kind}, not a recording file: a replay reads a whole file; save the "
        "recording to a file and replay that"
    )


def _first_line(name: str, line: str) -> dict:
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not (MAGIC in data or "event" in data):
        raise RecordingError(
            f"{name} is not a vmmtui recording (line 1 is neither a recording header nor an "
            "event); record one with `vmmtui --record FILE`"
        )
    return untrusted(data)


def _header(name: str, data: dict) -> Header:
    fmt = data.get(MAGIC)
    if not isinstance(fmt, int):
        raise RecordingError(f"{name} line 1: corrupt header (format {fmt!r})")
    if fmt > FORMAT:
        raise RecordingError(
            f"{name} is recording format {fmt}, made by a newer vmmtui; this one reads up to "
            f"{FORMAT}: upgrade vmmtui (in its clone: git pull && pip install .)"
        )
    body = {k: v for k, v in data.items() if k != MAGIC}
    try:
        header = decode(Header, body, "header")
    except DecodeError as exc:
        raise RecordingError(f"{name} line 1: corrupt header ({exc})") from None
    if header.events_version != VERSION:
        raise RecordingError(
            f"{name} holds events of version {header.events_version}; this vmmtui reads "
            f"version {VERSION}: replay it with the vmmtui {header.vmmtui_version} that made it"
        )
    return header


def size_on_disk(path: str | Path) -> int:
    return os.stat(path).st_size
