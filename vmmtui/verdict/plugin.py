"""vmmtui's verdict in a test run: a pytest plugin, registered by the ``pytest11`` entry point and
off unless asked.

- ``pytest --vmmtui`` traces every test; ``@pytest.mark.vmmtui(allow=[...],
  max_pinned_bytes=N)`` traces one (its options override the command line's).
- A traced test is its call phase, followed with ``vmmtui.tracing`` (this process and every
  process it starts, eBPF where allowed, polling otherwise). A test that leaves a problem fails
  with the verdict's words (at most ``PER_KIND`` problems of a kind, then how many more) and the
  path of its recording (``vmmtui replay PATH``); a passing test's recording is deleted
  (``--vmmtui-keep`` keeps them all). Only problems fail a test (``model/policy.py``): memory kept
  until a worker's normal exit is a fact, said in the section as a count.
- The run ends with a summary: how it observed, what polling cannot see (said once), the tests
  the verdict failed, where their recordings are.

Off, it costs an import of this module (pytest's own and the standard library) and nothing per
test: every hook returns at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import tempfile
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from vmmtui.verdict.api import Tracing, Verdict

#: at most this many problems of a kind are printed in a failing test's section, then how many
#: more (the recording has every one): a test that leaks 2,000 buffers printed 6,012 lines
PER_KIND = 5

MARKER = (
    "vmmtui(allow=(), max_pinned_bytes=None): trace this test with vmmtui (it and the processes "
    "it starts); a problem in vmmtui's verdict fails it"
)


@dataclass(frozen=True)
class Traced:
    """What the summary needs of one traced test, in plain values: it travels in the test's
    report (``user_properties``), which pytest-xdist carries from a worker to the controller, the
    process that prints the summary. ``mode`` is empty where the trace failed (no verdict)."""

    nodeid: str
    mode: str = ""
    reason: str = ""
    unseen: tuple[str, ...] = ()
    problems: int = 0
    first_kind: str = ""
    first_what: str = ""
    recording: str | None = None

    @classmethod
    def of(cls, nodeid: str, verdict: Verdict | None) -> Traced:
        if verdict is None:
            return cls(nodeid)
        first = verdict.problems[0] if verdict.problems else None
        return cls(
            nodeid,
            str(verdict.mode),
            verdict.reason,
            tuple(verdict.unseen),
            len(verdict.problems),
            first.kind if first else "",
            first.what if first else "",
            str(verdict.recording) if verdict.recording is not None else None,
        )


_PROPERTY = "vmmtui-verdict"
_TRACED = pytest.StashKey[Traced]()


@dataclass
class Run:
    """The plugin's state for one pytest run."""

    every: bool
    poll: bool
    allow: tuple[str, ...]
    max_pinned_bytes: int | None
    keep: bool
    folder: Path | None = None
    made_folder: bool = False
    #: every traced test as its report told it (in this process, or from xdist's workers)
    traced: list[Traced] = field(default_factory=list)

    def recordings(self) -> Path:
        """Where recordings go: ``--vmmtui-dir``, else a temporary folder made at the first."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="vmmtui-pytest-"))
            self.made_folder = True
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder

    def staged(self, name: str) -> Path:
        """Where a test's recording is written: in ``--vmmtui-dir``, else in the temporary
        directory under a name of its own, moved into the run's folder only when it is kept, so
        that no folder is made for a run whose recordings are all deleted, and a kill -9 leaves
        nothing (the recording has no name until it is whole: ``record.recording._Sink``)."""
        if self.folder is not None:
            return self.recordings() / name
        return Path(tempfile.gettempdir()) / f"vmmtui-{os.getpid()}-{secrets.token_hex(4)}.jsonl.gz"

    def kept(self, path: Path, name: str) -> Path:
        """The recording at ``path`` in the run's folder, as ``name`` (where it is not yet)."""
        folder = self.recordings()
        if path.parent == folder:
            return path
        try:
            os.replace(path, folder / name)
        except OSError:  # another file system: it stays where it was written
            return path
        return folder / name


_RUN = pytest.StashKey[Run]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("vmmtui", "vmmtui: fail a test that leaks shared memory")
    group.addoption(
        "--vmmtui",
        action="store_true",
        help="trace every test with vmmtui (eBPF as root or with CAP_BPF+CAP_PERFMON, else "
        "polling /proc); a test whose verdict has a problem fails",
    )
    group.addoption(
        "--vmmtui-poll", action="store_true", help="poll /proc even where eBPF is allowed"
    )
    group.addoption(
        "--vmmtui-allow",
        action="append",
        default=[],
        metavar="KIND",
        help="a finding kind that fails no test (repeat for more)",
    )
    group.addoption(
        "--vmmtui-max-pinned",
        type=int,
        default=None,
        metavar="BYTES",
        help="fail a test that leaves more than BYTES of shared memory pinned at its end",
    )
    group.addoption(
        "--vmmtui-dir",
        default=None,
        metavar="DIR",
        help="where the recordings go (default: a temporary folder, named in the summary)",
    )
    group.addoption(
        "--vmmtui-keep",
        action="store_true",
        help="keep the recordings of passing tests too (default: only failing tests')",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    o = config.option
    _CONFIG.append(config)
    config.stash[_RUN] = Run(
        every=bool(o.vmmtui),
        poll=bool(o.vmmtui_poll),
        allow=tuple(o.vmmtui_allow),
        max_pinned_bytes=o.vmmtui_max_pinned,
        keep=bool(o.vmmtui_keep),
        folder=Path(o.vmmtui_dir) if o.vmmtui_dir else None,
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    """With ``--vmmtui``, how the run observes, said before the first test."""
    run = config.stash[_RUN]
    if not run.every:
        return None
    from vmmtui.trace.loader import privileged, why_not
    from vmmtui.trace.polling import UNPROBED
    from vmmtui.words.verdict import how_observed, polled_because

    lack = why_not(advice=False)
    if lack and not privileged():
        lack = polled_because(lack)
    return how_observed("asked (--vmmtui-poll)" if run.poll else lack, UNPROBED)


def _options(item: pytest.Item, run: Run) -> dict | None:
    """The options of ``vmmtui.tracing`` for this test, or None when it is not traced."""
    marker = item.get_closest_marker("vmmtui")
    if marker is None and not run.every:
        return None
    if marker is not None and marker.args:
        pytest.fail(
            f"vmmtui: @pytest.mark.vmmtui takes its options by name (allow=[...], "
            f"max_pinned_bytes=N, poll=True), not {marker.args!r}",
            pytrace=False,
        )
    kw = dict(marker.kwargs) if marker is not None else {}
    allow = kw.pop("allow", run.allow)
    return {
        "allow": (allow,) if isinstance(allow, str) else tuple(allow),
        "max_pinned_bytes": kw.pop("max_pinned_bytes", run.max_pinned_bytes),
        "poll": kw.pop("poll", run.poll),
        **kw,
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    run = item.config.stash[_RUN]
    options = _options(item, run)
    if options is None:
        return (yield)
    from vmmtui.verdict.api import TraceError, tracing

    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in item.nodeid)[-150:]
    name = f"{name}.jsonl.gz"
    try:
        t: Tracing = tracing(record=run.staged(name), title=f"pytest {item.nodeid}", **options)
        t.__enter__()
    except TraceError as exc:
        pytest.fail(f"vmmtui: {exc}", pytrace=False)
    except TypeError as exc:  # a marker option tracing() does not take
        pytest.fail(f"vmmtui: @pytest.mark.vmmtui: {exc}", pytrace=False)
    try:
        result = yield
    except BaseException:  # the test's own failure is the test's: the verdict is said beside it
        verdict, failed = _end(t, item, run, name, keep=True)
        item.add_report_section("call", "vmmtui", verdict.report(PER_KIND) if verdict else failed)
        raise
    verdict, failed = _end(t, item, run, name, keep=run.keep)
    if verdict is None:  # a verdict that could not be made is no "nothing wrong found"
        pytest.fail(failed, pytrace=False)
    if verdict.problems:
        pytest.fail(verdict.report(PER_KIND), pytrace=False)
    item.add_report_section("call", "vmmtui", verdict.report(PER_KIND))
    return result


def _end(
    t: Tracing, item: pytest.Item, run: Run, name: str, keep: bool
) -> tuple[Verdict | None, str]:
    """The block's end: its verdict (kept for the summary), or None and why the trace failed
    (one line, its cause and fix). Its recording is moved into the run's folder (``keep``, or
    a problem in it), else deleted."""
    from vmmtui.verdict.api import TraceError

    try:
        t.__exit__(None, None, None)
    except TraceError as exc:
        item.stash[_TRACED] = Traced.of(item.nodeid, None)
        return None, f"vmmtui: {exc}"
    verdict = t.verdict
    if verdict is not None and verdict.recording is not None:
        path: Path | None = verdict.recording
        if keep or verdict.problems:
            path = run.kept(verdict.recording, name)
        else:
            with contextlib.suppress(OSError):
                os.unlink(verdict.recording)
            path = None
        verdict = dataclasses.replace(verdict, recording=path)
    item.stash[_TRACED] = Traced.of(item.nodeid, verdict)
    return verdict, ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo
) -> Generator[None, object, object]:
    """The traced test's summary rides in its call report, as plain values."""
    report = yield
    traced = item.stash.get(_TRACED, None)
    if call.when == "call" and traced is not None and isinstance(report, pytest.TestReport):
        report.user_properties.append((_PROPERTY, dataclasses.asdict(traced)))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each report that carries a traced test's summary, in the process that prints the summary
    (the only one where pytest-xdist runs; the controller where it does)."""
    for name, value in report.user_properties:
        if name == _PROPERTY and isinstance(value, dict):
            run = _run_of(report)
            if run is not None:
                value = {**value, "unseen": tuple(value.get("unseen", ()))}
                run.traced.append(Traced(**value))


_CONFIG: list[pytest.Config] = []


def _run_of(report: pytest.TestReport) -> Run | None:
    return _CONFIG[-1].stash.get(_RUN, None) if _CONFIG else None


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash[_RUN]
    if not run.traced:
        return
    from vmmtui.words import verdict as said

    tr = terminalreporter
    tr.section("vmmtui")
    judged = [t for t in run.traced if t.mode]
    failed = [t for t in run.traced if not t.mode]
    polled = [t for t in judged if t.mode == "polling"]
    if polled:  # said once, clearly: what this run could not see
        v = polled[0]
        tr.write_line(said.polled_tests(len(polled), len(judged), v.reason, v.unseen))
    bad = [t for t in judged if t.problems]
    modes = sorted({t.mode for t in judged})
    tr.write_line(said.tests_traced(len(judged), modes, len(bad), len(failed)))
    for t in bad:
        tr.write_line(said.failed_test(t.nodeid, t.first_kind, t.first_what, t.problems - 1))
        if t.recording is not None:
            tr.write_line(f"    vmmtui replay {t.recording}")
    for t in failed:
        tr.write_line(said.untraced_test(t.nodeid))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A temporary folder the run made and left empty is removed."""
    if config in _CONFIG:
        _CONFIG.remove(config)
    run = config.stash.get(_RUN, None)
    if run is not None and run.made_folder and run.folder is not None:
        with contextlib.suppress(OSError):
            if not any(run.folder.iterdir()):
                shutil.rmtree(run.folder)
