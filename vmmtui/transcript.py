"""A record of everything a session did: Markdown for people, JSON lines for programs."""

from __future__ import annotations

import json
from pathlib import Path

from vmmtui.events import (
    Event,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.steps import step_info


class Transcript:
    """Appends every event to ``path``: ``.jsonl``/``.json`` as JSON lines, anything else as Markdown."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.json = self.path.suffix in (".jsonl", ".json", ".ndjson")
        self.file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - held open for the session
        self._kcmp: dict[str, str] = {}  # last verdict per consumer
        self.mechanism = "vmm"
        if not self.json:
            self.file.write("# vmmtui transcript\n\n")

    def write(self, e: Event) -> None:
        if self.json:
            self.file.write(json.dumps(e.to_dict(), default=str, ensure_ascii=False) + "\n")
        else:
            self.file.write(self._markdown(e))
        self.file.flush()

    def _markdown(self, e: Event) -> str:
        if isinstance(e, SessionStarted):
            self.mechanism = e.mechanism
            return (f"- backend: **{e.backend}** ({e.reason})\n- requested size: {e.requested_size} bytes\n"
                    f"- mechanism: {e.mechanism}, {len(e.consumers)} consumer(s), {e.direction}\n"
                    f"- socket: `{e.socket_path}` (private directory, mode 0700)\n\n")
        if isinstance(e, WorkerStarted):
            return f"- started {e.role} worker, pid {e.pid}\n"
        if isinstance(e, StepDone):
            r = e.report
            try:
                title = step_info(r.role, r.step, self.mechanism).title
            except KeyError:
                title = r.step
            head = f"\n## {r.role}: {title} ({'ok' if r.ok else 'FAILED'}, {r.duration_ns / 1e6:.3f} ms)\n\n"
            body = "".join(f"    {line}\n" for line in r.log)
            if r.calls:
                body += "\n| call | arguments | result | ms |\n|---|---|---|---|\n"
                for c in r.calls:
                    args = ", ".join(f"{k}={v}" for k, v in c.args.items()).replace("|", "\\|")
                    body += f"| `{c.name}` | {args} | {str(c.result).replace('|', '/')} | {c.duration_ns / 1e6:.3f} |\n"
            if r.opened:
                body += "\nopened: " + ", ".join(f"fd {h.fd} ({h.kind}, {h.target})" for h in r.opened) + "\n"
            if r.closed:
                body += "\nclosed: " + ", ".join(f"fd {fd}" for fd in r.closed) + "\n"
            return head + body
        if isinstance(e, FdSnapshot):
            if e.error:
                return f"\n{e.role} fd table: {e.error}\n"
            checks = [r for r in e.rows if r.check]
            bad = e.problems
            line = f"\n{e.role} (pid {e.pid}) fd table: {len(e.rows)} fds, {len(checks)} declared, "
            line += "all match /proc\n" if not bad else f"{len(bad)} PROBLEM(S): " + "; ".join(
                f"fd {r.fd} {r.check} {r.detail}" for r in bad) + "\n"
            return line
        if isinstance(e, KcmpVerdict):
            text = e.describe()
            if text == self._kcmp.get(e.consumer):
                return ""
            self._kcmp[e.consumer] = text
            return f"\n**kcmp(KCMP_FILE)**: {text}\n"
        if isinstance(e, SessionFailed):
            f = e.failure
            return f"\n**FAILED** at {e.role} {e.step}: `{f.call}` → {f.code} ({f.message})\n- cause: {f.cause}\n- fix: {f.fix}\n"
        if isinstance(e, SessionFinished):
            return (f"\n## Result\n\n{'VERIFIED' if e.verified else 'NOT VERIFIED'}: {e.integers} integers; "
                    f"{e.fd_checks} fd checks, {e.fd_problems} problems; kcmp: {e.kcmp}\n")
        if isinstance(e, WorkerExited):
            how = e.describe()
            return f"- {how}{'' if e.expected else ' (unexpected)'}\n"
        if isinstance(e, SessionClosed):
            return "\n" + ("Closed cleanly: no workers, no socket directory left.\n" if e.clean
                           else "Left behind: " + "; ".join(e.leftovers) + "\n")
        if isinstance(e, Notice):
            return f"- note: {e.text}\n"
        return ""

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()
