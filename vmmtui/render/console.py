"""Plain-terminal rendering of session events for ``vmmtui run`` (the seed's log lines, real values).

The words are ``narration``'s; this module only lays them out: a role column, then the line.
"""

from __future__ import annotations

from typing import Any, TextIO

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from vmmtui.stream.events import (
    AttachEvent,
    Event,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    StepStarted,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.stream.sizes import format_size
from vmmtui.words import narration as say


class LogPrinter:
    """Prints each role's log lines as steps finish, then one summary line."""

    def __init__(self, out: TextIO | None = None, verbose: bool = False):
        self.console = Console(file=out, highlight=False, soft_wrap=True)
        self.verbose = verbose
        self.kcmp: dict[str, KcmpVerdict] = {}
        self.repeats = say.Repeats()
        self.fd_checks = 0
        self.fd_problems: list[str] = []
        self.started: SessionStarted | None = None
        self.finished: SessionFinished | None = None
        self.failed: SessionFailed | None = None
        self.exits: list[WorkerExited] = []
        self.closed: SessionClosed | None = None
        self.outcome: ScenarioOutcome | None = None
        #: the kernel's record of the workers (eBPF): folded as the inspector folds it, each
        #: step's facts printed dim under the step's own lines
        self.kernel: Any = None
        #: the driver's own mappings outside a step, left out of the lines and counted
        self.plumbing = 0
        self.pids: dict[int, str] = {}
        self.in_step = False
        self.step_facts: list[Any] = []
        #: the roles whose first step has ended: the driver's churn before is its start-up
        self.stepped: set[str] = set()

    def tag(self, role: str) -> Text:
        return Text.assemble((f"{role:>8}", say.role_style(role) or "white"), " │ ")

    def line(self, role: str, text: Text) -> None:
        self.console.print(self.tag(role) + text)

    def __call__(self, e: Event) -> None:
        c = self.console
        if isinstance(e, SessionStarted):
            self.started = e
            for text in say.started(e):
                c.print(text)
        elif isinstance(e, WorkerStarted):
            self.pids[e.pid] = e.role
            self.line(e.role, say.worker_started(e))
        elif isinstance(e, StepStarted):
            self.in_step = True
        elif isinstance(e, AttachEvent):
            self._kernel(e)
        elif isinstance(e, Notice):
            c.print(say.notice(e))
        elif isinstance(e, StepDone):
            for log in e.report.log:
                text = say.log_line(log)
                if not log.startswith("ERROR"):
                    text.style = ""  # the seed's lines, as the seed printed them
                self.line(e.role, text)
            if self.verbose:
                for call in e.report.calls:
                    self.line(e.role, Text("  ") + say.call(call))
            self._kernel_lines(e.role)
        elif isinstance(e, FdSnapshot):
            self.fd_checks += len([r for r in e.rows if r.check])
            for r in e.problems:
                self.fd_problems.append(f"{e.role} fd {r.fd}: {r.check} ({r.detail})")
                self.line(e.role, say.fd_problem(e.role, r))
        elif isinstance(e, KcmpVerdict):
            if self.repeats.new(e):
                self.line(say.KERNEL, say.kcmp_line(e))
            self.kcmp[e.consumer] = e
        elif isinstance(e, SessionFailed):
            self._kernel_lines(e.role)
            self.failed = e
            for text in say.failed(e):
                c.print(text)
        elif isinstance(e, WorkerExited):
            self.exits.append(e)
            if not e.expected:
                self.line(e.role, say.exited(e))
                for text in say.log_tail(e):
                    self.line(e.role, text)
        elif isinstance(e, SessionFinished):
            self.finished = e
        elif isinstance(e, SessionClosed):
            self.closed = e
        elif isinstance(e, ScenarioOutcome):
            self.outcome = e
            c.print(say.outcome(e))

    def _kernel(self, e: AttachEvent) -> None:
        """A call the kernel recorded in a worker: kept for its step, or said now outside one."""
        from vmmtui.stream.observed import TraceFinished, TraceStarted
        from vmmtui.view.kernel import OUTSIDE, fold_kernel
        from vmmtui.words import trace as trace_say

        self.kernel, fact = fold_kernel(self.kernel, e, self.pids, 0 if self.in_step else OUTSIDE)
        if fact is not None and self.in_step:
            self.step_facts.append(fact)
            return
        if fact is not None and fact.plumbing:  # counted, said with the record's end
            self.plumbing += 1
            return
        if fact is not None:
            text = trace_say.kernel_fact(fact)
        elif isinstance(e, TraceStarted):
            text = trace_say.kernel_started(e, self.pids)
        elif isinstance(e, TraceFinished):
            if self.plumbing:
                self.line(
                    say.KERNEL,
                    Text(self._churn(self.plumbing).removeprefix("kernel: "), "dim"),
                )
            text = trace_say.kernel_finished(e)
        else:
            return
        if text.plain.startswith("kernel: "):  # the tag says it
            text = text[len("kernel: ") :]
        text.stylize("dim")
        self.line(say.KERNEL, text)

    def _churn(self, count: int, start: bool = False) -> str:
        from vmmtui.words import trace as trace_say

        backend = self.started.backend if self.started else "cuda"
        return trace_say.plumbing_left_out(count, backend, start)

    def _kernel_lines(self, role: str) -> None:
        """The step's facts, under its lines, dim, in the kernel's order; the driver's and the
        runtime's own churn (its files, its device mappings, its helpers) in one counted line."""
        start = role not in self.stepped
        self.stepped.add(role)
        if not self.step_facts:
            self.in_step = False
            return
        from vmmtui.words import trace as trace_say

        facts, self.step_facts, self.in_step = self.step_facts, [], False
        kept = {id(f) for f in trace_say.kernel_step_facts(facts)}
        for f in facts:
            if id(f) in kept:
                text = Text("  ") + trace_say.kernel_fact(f)
                text.stylize("dim")
                self.line(role, text)
        if plumbing := sum(f.plumbing for f in facts):
            self.line(role, Text("  " + self._churn(plumbing, start), "dim"))

    def kcmp_summary(self) -> Text:
        """kcmp's summary from SessionFinished when the session got there, else from what was seen;
        said at the end, once the cleanup has closed the fds kcmp compared: in the past."""
        consumers = len(self.started.consumers) if self.started else None
        if self.finished is not None:
            return say.kcmp_summary(
                self.finished.kcmp, self.finished.mechanism, consumers, past=True
            )
        mechanism = self.started.mechanism if self.started else "vmm"
        return say.kcmp_summary(self.kcmp.values(), mechanism, consumers, past=True)

    def summary(self) -> str:
        """One line (console markup): scenario outcome, verdict, fd cross-check, kcmp, cleanliness."""
        parts = []
        if self.outcome is not None:
            judged = (
                "[bold green]as expected[/]"
                if self.outcome.as_expected
                else "[bold red]NOT as expected[/]"
            )
            parts.append(f"scenario {escape(self.outcome.name)}: {judged}")
        if self.finished and self.finished.verified:
            parts.append(
                f"[bold green]{say.VERIFIED}[/] {self.finished.integers} integers "
                f"({format_size(self.finished.integers * 4)})"
            )
        else:
            parts.append(f"[bold red]{escape(say.verdict(False, self.failed).plain)}[/]")
        checked = say.fd_cross_check(self.fd_checks, len(self.fd_problems))
        parts.append(f"[red]{checked.plain}[/]" if self.fd_problems else checked.plain)
        parts.append(f"kcmp: {escape(self.kcmp_summary().plain)}")
        if self.closed is not None:
            text = say.closed(self.closed).plain
            parts.append(escape(text) if self.closed.clean else f"[red]{escape(text)}[/]")
        return " · ".join(parts)


def print_json(e: Event, out: TextIO, flush: bool = True) -> None:
    """One event as one JSON line: exactly ``Event.to_json()``, what ``Event.from_json`` reads back.
    ``flush=False``: the caller flushes once a batch (a write per event cost more than the event)."""
    from vmmtui.words.findings import json_line

    out.write(json_line(e) + "\n")
    if flush:
        out.flush()
