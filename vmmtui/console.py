"""Plain-terminal rendering of session events for ``vmmtui run`` (the seed's log lines, real values)."""

from __future__ import annotations

import json
from typing import TextIO

from rich.console import Console
from rich.markup import escape

from vmmtui.events import (
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
    WorkerExited,
    WorkerStarted,
)
from vmmtui.sizes import format_size
from vmmtui.steps import SEED_SHAPE, kind

ROLE_STYLE = {"producer": "cyan", "consumer": "magenta"}


class LogPrinter:
    """Prints each role's log lines as steps finish, then one summary line."""

    def __init__(self, out: TextIO | None = None, verbose: bool = False):
        self.console = Console(file=out, highlight=False, soft_wrap=True)
        self.verbose = verbose
        self.kcmp: dict[str, KcmpVerdict] = {}
        self.fd_checks = 0
        self.fd_problems: list[str] = []
        self.finished: SessionFinished | None = None
        self.failed: SessionFailed | None = None
        self.exits: list[WorkerExited] = []
        self.closed: SessionClosed | None = None
        self.outcome: ScenarioOutcome | None = None

    def tag(self, role: str) -> str:
        return f"[{ROLE_STYLE.get(kind(role), 'white')}]{role:>8}[/] │ "

    def __call__(self, e: Event) -> None:
        c = self.console
        if isinstance(e, SessionStarted):
            c.print(f"[bold]backend:[/] {escape(e.reason)}")
            c.print(f"[dim]socket: {escape(e.socket_path)} (private directory, mode 0700)[/]")
            if (e.mechanism, len(e.consumers), e.direction) != SEED_SHAPE:
                devices = ", ".join(f"{n} on device {d}" for n, d in e.devices.items()) if e.backend == "cuda" else ""
                c.print(f"[bold]mechanism:[/] {e.mechanism} · {len(e.consumers)} consumer(s) · {e.direction}"
                        + (f" · {devices}" if devices else ""))
        elif isinstance(e, WorkerStarted):
            c.print(f"{self.tag(e.role)}[dim]started worker pid {e.pid}[/]")
        elif isinstance(e, Notice):
            c.print(f"[yellow]note:[/] {escape(e.text)}")
        elif isinstance(e, StepDone):
            for line in e.report.log:
                style = "red" if line.startswith("ERROR") else ""
                c.print(self.tag(e.role) + (f"[{style}]{escape(line)}[/]" if style else escape(line)))
            if self.verbose:
                for call in e.report.calls:
                    args = ", ".join(f"{k}={v}" for k, v in call.args.items())
                    c.print(self.tag(e.role) + f"[dim]  {escape(call.name)}({escape(args)}) → {escape(call.result)} "
                            f"[{call.duration_ns / 1e6:.3f} ms][/]")
        elif isinstance(e, FdSnapshot):
            checked = [r for r in e.rows if r.check]
            self.fd_checks += len(checked)
            for r in e.problems:
                self.fd_problems.append(f"{e.role} fd {r.fd}: {r.check} ({r.detail})")
                c.print(self.tag(e.role) + f"[red]fd check: fd {r.fd} {r.check}: {escape(r.detail)}[/]")
        elif isinstance(e, KcmpVerdict):
            last = self.kcmp.get(e.consumer)
            if last is None or (last.producer_fd, last.consumer_fd, last.same) != (e.producer_fd, e.consumer_fd, e.same):
                c.print(f"{'kernel':>8} │ kcmp(KCMP_FILE): {escape(e.describe())}")
            self.kcmp[e.consumer] = e
        elif isinstance(e, SessionFailed):
            self.failed = e
            f = e.failure
            c.print(f"[bold red]FAILED[/] at {e.role} step {e.step}: {escape(f.call)} → {escape(f.code)} ({escape(f.message)})")
            if f.cause:
                c.print(f"  cause: {escape(f.cause)}")
            if f.fix:
                c.print(f"  fix:   {escape(f.fix)}")
        elif isinstance(e, WorkerExited):
            self.exits.append(e)
            if not e.expected:
                c.print(f"{self.tag(e.role)}[yellow]{escape(e.describe())}[/]")
                for line in e.log_tail:
                    c.print(f"{self.tag(e.role)}[dim]log: {escape(line)}[/]")
        elif isinstance(e, SessionFinished):
            self.finished = e
        elif isinstance(e, SessionClosed):
            self.closed = e
        elif isinstance(e, ScenarioOutcome):
            self.outcome = e
            where = f" at {e.at}" if e.at else ""
            verdict = "[green]as expected[/]" if e.as_expected else f"[red]NOT as expected[/] (expected {', '.join(e.expected)})"
            c.print(f"[bold]scenario {escape(e.name)}:[/] ended with {escape(e.outcome)}{escape(where)}: {verdict}")

    def summary(self) -> str:
        parts = []
        if self.outcome is not None:
            parts.append(f"scenario {escape(self.outcome.name)}: "
                         + ("[bold green]as expected[/]" if self.outcome.as_expected else "[bold red]NOT as expected[/]"))
        if self.finished and self.finished.verified:
            parts.append(f"[bold green]VERIFIED[/] {self.finished.integers} integers ({format_size(self.finished.integers * 4)})")
        else:
            parts.append("[bold red]NOT VERIFIED[/]")
        if self.fd_problems:
            parts.append(f"[red]fd cross-check: {len(self.fd_problems)} problem(s) in {self.fd_checks} checks[/]")
        else:
            parts.append(f"fd cross-check: {self.fd_checks}/{self.fd_checks} match /proc")
        if self.finished is not None and (len(self.kcmp) > 1 or not self.kcmp):
            parts.append(f"kcmp: {escape(self.finished.kcmp)}")
        elif self.kcmp:
            parts.append(f"kcmp: {escape(next(iter(self.kcmp.values())).describe())}")
        else:
            parts.append("kcmp: not reached")
        if self.closed is not None:
            parts.append("clean: no workers, no socket directory left" if self.closed.clean
                         else f"[red]left behind: {'; '.join(self.closed.leftovers)}[/]")
        return " · ".join(parts)


def print_json(e: Event, out: TextIO) -> None:
    out.write(json.dumps(e.to_dict(), default=str, ensure_ascii=False) + "\n")
    out.flush()
