"""A record of everything a session did: Markdown for people, JSON lines for programs.

JSON lines are exactly ``Event.to_json()`` (``Event.from_json`` reads them back); the Markdown's
sentences are ``narration``'s, laid out under one heading per step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vmmtui.plan.steps import step_info
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
    WorkerExited,
    WorkerStarted,
)
from vmmtui.stream.names import shown
from vmmtui.words import narration as say
from vmmtui.words.findings import json_line

JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")


class Transcript:
    """Appends every event to ``path``: ``.jsonl``/``.json`` as JSON lines, anything else as Markdown.

    Whole or not at all (``system.atomic``): written beside its name and put in place by
    ``close()``; a write that fails leaves nothing under the name and ``error`` says so."""

    def __init__(self, path: str | Path):
        from vmmtui.system.atomic import AtomicFile

        self.path = Path(path)
        self.json = self.path.suffix in JSON_SUFFIXES
        self.out = AtomicFile(self.path)
        self.file = self.out.file
        #: why writing stopped (one line with the cause), or None
        self.error: str | None = None
        self.repeats = say.Repeats()
        self.mechanism = "vmm"
        self.transport = "scm-rights"
        self.consumers: int | None = None
        #: a trace's clock and process names (its events name processes by pid)
        self.names: Any = None
        if not self.json:
            self.file.write("# vmmtui transcript\n\n")

    def write(self, e: Event) -> None:
        """Append ``e``; a write that fails (disk full, file system gone read-only) sets ``error`` and
        stops the transcript instead of stopping the session."""
        if self.error:
            return
        try:
            self.file.write(json_line(e) + "\n" if self.json else self.markdown(e))
            self.file.flush()
        except OSError as exc:
            self._lost(exc)

    def note(self, on: str, text: str) -> None:
        """A teacher's note (replay --notes) as a quote in the Markdown; JSON lines hold only events."""
        if self.json or self.error:
            return
        quoted = "\n".join(f"> {line}".rstrip() for line in text.splitlines())
        try:
            self.file.write(f"\n> **teacher's note ({on})**\n>\n{quoted}\n\n")
        except OSError as exc:
            self._lost(exc)

    def markdown(self, e: Event) -> str:
        if isinstance(e, SessionStarted):
            self.mechanism, self.consumers = e.mechanism, len(e.consumers)
            self.transport = e.transport
            lines = [t.plain for t in say.started(e)]
            return (
                "".join(f"- {line}\n" for line in lines)
                + f"- requested size: {e.requested_size} bytes\n\n"
            )
        if isinstance(e, WorkerStarted):
            return f"- {e.role}: {say.worker_started(e).plain}\n"
        if isinstance(e, StepDone):
            return self._step(e)
        if isinstance(e, FdSnapshot):
            return f"\n{say.fd_table(e).plain}\n"
        if isinstance(e, KcmpVerdict):
            return (
                f"\n**kcmp(KCMP_FILE)**: {say.kcmp_verdict(e).plain}\n"
                if self.repeats.new(e)
                else ""
            )
        if isinstance(e, SessionFailed):
            head, *rest = say.failed(e)
            return f"\n**{head.plain}**\n" + "".join(f"- {t.plain.strip()}\n" for t in rest)
        if isinstance(e, SessionFinished):
            return f"\n## Result\n\n{say.finished(e, self.consumers).plain}\n"
        if isinstance(e, WorkerExited):
            return f"- {say.exited(e).plain}{'' if e.expected else ' (unexpected)'}\n" + "".join(
                f"    {t.plain}\n" for t in say.log_tail(e)
            )
        if isinstance(e, SessionClosed):
            return f"\n{say.closed(e).plain}\n"
        if isinstance(e, Notice):
            return f"- {say.notice(e).plain}\n"
        if isinstance(e, ScenarioOutcome):
            return f"\n**{say.outcome(e).plain}**\n"
        if isinstance(e, AttachEvent):
            return self._program(e)
        return ""

    def _program(self, e: AttachEvent) -> str:
        """A trace's or a polling's event, as the trace prints it (the calls as a code block)."""
        from vmmtui.stream.observed import TraceEvent
        from vmmtui.words.trace import ProcessNames, lines

        if not isinstance(e, TraceEvent):
            return "".join(f"- {t.plain}\n" for t in say.attach_lines(e))
        if self.names is None:
            self.names = ProcessNames()
        self.names.see(e)
        comm = self.names.comms.get(getattr(e, "pid", 0), "")
        return "".join(f"    {t.plain}\n" for t in lines(e, self.names.t0, comm))

    def _step(self, e: StepDone) -> str:
        r = e.report
        try:
            title = step_info(r.role, r.step, self.mechanism, self.transport).title
        except KeyError:
            title = r.step
        head = f"\n## {r.role}: {title} ({'ok' if r.ok else 'FAILED'}, {r.duration_ns / 1e6:.3f} ms)\n\n"
        body = "".join(f"    {line}\n" for line in r.log)
        if r.calls:
            body += "\n| call | arguments | result | ms |\n|---|---|---|---|\n"
            for c in r.calls:
                args = ", ".join(f"{k}={v}" for k, v in c.args.items()).replace("|", "\\|")
                body += f"| `{c.name}` | {args} | {str(say.call_result(c)).replace('|', '/')} | {c.duration_ns / 1e6:.3f} |\n"
        if r.opened:
            body += (
                "\nopened: "
                + ", ".join(f"fd {h.fd} ({h.kind}, {shown(h.target)})" for h in r.opened)
                + "\n"
            )
        if r.closed:
            body += "\nclosed: " + ", ".join(f"fd {fd}" for fd in r.closed) + "\n"
        return head + body

    def _lost(self, exc: OSError) -> None:
        """Writing failed: nothing is left under the name, and ``error`` says so in one line."""
        self.error = (
            f"cannot write the transcript {self.path}: {exc.strerror or exc}; nothing was written "
            "(the session goes on); free space there, or name a file on another file system"
        )
        self.out.abort()

    def close(self) -> None:
        """The transcript complete, in place; or ``error`` says why there is none."""
        if self.out.done:
            return
        try:
            self.out.commit()
        except OSError as exc:  # the last write or the rename failed (a full disk)
            self.error = self.error or (
                f"cannot write the transcript {self.path}: {exc.strerror or exc}; nothing was "
                "written: free space there, or name a file on another file system"
            )
