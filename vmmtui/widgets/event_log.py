"""Every call with its arguments, result and duration, and every notable event, as it happens."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from vmmtui.events import (
    Event,
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
from vmmtui.widgets.display import Display

ROLE_STYLE = {"producer": "cyan", "consumer": "magenta"}


class EventLog(RichLog):
    def __init__(self, display: Display, **kw):
        super().__init__(wrap=False, markup=False, highlight=False, max_lines=5000, **kw)
        self.fmt = display
        self.border_title = "event log"
        self._kcmp: dict[str, str] = {}  # last verdict per consumer

    def tag(self, role: str) -> Text:
        return Text(f"{role[:4]} ", style=ROLE_STYLE.get(role, ""))

    def log_event(self, e: Event) -> None:
        d = self.fmt
        if isinstance(e, SessionStarted):
            self.write(Text(f"backend: {e.reason}", style="bold"))
        elif isinstance(e, WorkerStarted):
            self.write(self.tag(e.role) + Text(f"worker started, pid {d.pid(e.pid)}", style="dim"))
        elif isinstance(e, StepDone):
            for c in e.report.calls:
                args = ", ".join(f"{k}={v}" for k, v in c.args.items())
                line = self.tag(e.role) + Text(f"{c.name}", style="bold" if c.ok else "bold red")
                line.append(d.text(f"({args}) → {c.result}"), style="" if c.ok else "red")
                line.append(f"  {d.ms(c.duration_ns)}", style="dim")
                self.write(line)
            for msg in e.report.log:
                self.write(self.tag(e.role) + Text(d.text(msg), style="red" if msg.startswith("ERROR") else "green"))
        elif isinstance(e, KcmpVerdict):
            text = e.describe()
            if text != self._kcmp.get(e.consumer):
                self._kcmp[e.consumer] = text
                self.write(Text("kern ", style="yellow") + Text(f"kcmp(KCMP_FILE): {text}", style="bold"))
        elif isinstance(e, SessionFailed):
            self.write(Text(f"FAILED {e.role} {e.step}: {e.failure.one_line()}", style="bold red"))
        elif isinstance(e, WorkerExited):
            style = "dim" if e.expected else "bold red"
            self.write(self.tag(e.role) + Text(d.text(e.describe()), style=style))
            for line in e.log_tail:
                self.write(self.tag(e.role) + Text(f"log: {line}", style="dim"))
        elif isinstance(e, SessionFinished):
            self.write(Text(f"{'VERIFIED' if e.verified else 'NOT VERIFIED'} · {e.fd_checks} fd checks, "
                            f"{e.fd_problems} problems · kcmp: {e.kcmp}", style="bold green" if e.verified else "bold red"))
        elif isinstance(e, SessionClosed):
            self.write(Text("session closed cleanly" if e.clean else "left behind: " + "; ".join(e.leftovers),
                            style="dim" if e.clean else "bold red"))
        elif isinstance(e, Notice):
            self.write(Text(f"note: {e.text}", style="yellow"))
        elif isinstance(e, ScenarioOutcome):
            where = f" at {e.at}" if e.at else ""
            self.write(Text(f"scenario {e.name}: ended with {e.outcome}{where}: "
                            + ("as expected" if e.as_expected else f"NOT as expected ({', '.join(e.expected)})"),
                            style="bold green" if e.as_expected else "bold red"))
