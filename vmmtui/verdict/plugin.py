"""vmmtui's verdict in a test run: a pytest plugin, registered by the ``pytest11`` entry point and
off unless asked.

- ``pytest --vmmtui`` traces every test; ``@pytest.mark.vmmtui(allow=[...],
  max_pinned_bytes=N)`` traces one (its options override the command line's).
- A traced test is its call phase, followed with ``vmmtui.tracing`` (this process and every
  process it starts, eBPF where allowed, polling otherwise). A test that leaves a problem fails
  with the verdict's words and the path of its recording (``vmmtui replay PATH``); a passing
  test's recording is deleted (``--vmmtui-keep`` keeps them all).
- The run ends with a summary: how it observed, what polling cannot see (said once), the tests
  the verdict failed, where their recordings are.

Off, it costs an import of this module (pytest's own and the standard library) and nothing per
test: every hook returns at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from vmmtui.verdict.api import Tracing, Verdict

MARKER = (
    "vmmtui(allow=(), max_pinned_bytes=None): trace this test with vmmtui (it and the processes "
    "it starts); a problem in vmmtui's verdict fails it"
)


@dataclass
class Traced:
    """What the run keeps of each traced test, for its summary."""

    nodeid: str
    verdict: Verdict


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
    traced: list[Traced] = field(default_factory=list)
    #: the tests whose trace failed (each failed with why)
    failed: list[str] = field(default_factory=list)

    def recordings(self) -> Path:
        """Where recordings go: ``--vmmtui-dir``, else a temporary folder made at the first."""
        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="vmmtui-pytest-"))
            self.made_folder = True
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.folder


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
    path = run.recordings() / f"{name}.jsonl"
    try:
        t: Tracing = tracing(record=path, title=f"pytest {item.nodeid}", **options)
        t.__enter__()
    except TraceError as exc:
        pytest.fail(f"vmmtui: {exc}", pytrace=False)
    except TypeError as exc:  # a marker option tracing() does not take
        pytest.fail(f"vmmtui: @pytest.mark.vmmtui: {exc}", pytrace=False)
    try:
        result = yield
    except BaseException:  # the test's own failure is the test's: the verdict is said beside it
        verdict, failed = _end(t, item, run)
        item.add_report_section("call", "vmmtui", verdict.report() if verdict else failed)
        raise
    verdict, failed = _end(t, item, run)
    if verdict is None:  # a verdict that could not be made is no "nothing wrong found"
        pytest.fail(failed, pytrace=False)
    if verdict.problems:
        pytest.fail(verdict.report(), pytrace=False)
    if not run.keep and verdict.recording is not None:
        with contextlib.suppress(OSError):
            os.unlink(verdict.recording)
        verdict = dataclasses.replace(verdict, recording=None)
    item.add_report_section("call", "vmmtui", verdict.report())
    return result


def _end(t: Tracing, item: pytest.Item, run: Run) -> tuple[Verdict | None, str]:
    """The block's end: its verdict (kept for the summary), or None and why the trace failed
    (one line, its cause and fix)."""
    from vmmtui.verdict.api import TraceError

    try:
        t.__exit__(None, None, None)
    except TraceError as exc:
        run.failed.append(item.nodeid)
        return None, f"vmmtui: {exc}"
    if t.verdict is not None:
        run.traced.append(Traced(item.nodeid, t.verdict))
    return t.verdict, ""


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    run = config.stash[_RUN]
    if not run.traced and not run.failed:
        return
    from vmmtui.words import verdict as said

    tr = terminalreporter
    tr.section("vmmtui")
    polled = [t for t in run.traced if t.verdict.mode == "polling"]
    if polled:  # said once, clearly: what this run could not see
        v = polled[0].verdict
        tr.write_line(said.polled_tests(len(polled), len(run.traced), v.reason, v.unseen))
    bad = [t for t in run.traced if t.verdict.problems]
    modes = sorted({str(t.verdict.mode) for t in run.traced})
    tr.write_line(said.tests_traced(len(run.traced), modes, len(bad), len(run.failed)))
    for t in bad:
        tr.write_line(
            said.failed_test(t.nodeid, t.verdict.problems[0], len(t.verdict.problems) - 1)
        )
        if t.verdict.recording is not None:
            tr.write_line(f"    vmmtui replay {t.verdict.recording}")
    for nodeid in run.failed:
        tr.write_line(said.untraced_test(nodeid))


def pytest_unconfigure(config: pytest.Config) -> None:
    """A temporary folder the run made and left empty is removed."""
    run = config.stash.get(_RUN, None)
    if run is not None and run.made_folder and run.folder is not None:
        with contextlib.suppress(OSError):
            if not any(run.folder.iterdir()):
                shutil.rmtree(run.folder)
