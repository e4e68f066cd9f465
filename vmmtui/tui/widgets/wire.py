"""The wire between the two processes: socket, peer, metadata, the fd in flight, the ACK, and the
kernel's verdict on the fd pair; and the verification result."""

from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text
from textual import on
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.codec import encode
from vmmtui.events import KcmpVerdict, SessionFinished, SessionStarted, StepDone
from vmmtui.pattern import Verification
from vmmtui.sizes import format_size
from vmmtui.steps import base, kind, peer_of
from vmmtui.tui.messages import EventView, SessionEvent
from vmmtui.tui.widgets.display import Display

#: metadata fields the wire does not print: the handle has its own row, the type is always "alloc"
HIDDEN_METADATA = ("ipc_handle", "export_data", "type", "v")
#: fields shown only where they say something (the pidfd road's pid and fd number)
UNSAID = {"transport": "scm-rights", "pid": 0, "fd": -1}


class WirePanel(EventView, Static):
    def __init__(self, display: Display, **kw):
        super().__init__(**kw)
        self.fmt = display
        self.border_title = "the wire"
        self.reset()

    def reset(self) -> None:
        self.socket_path = ""
        self.listening = False
        self.peer: str = "-"
        self.metadata: dict | None = None
        self.in_flight: str = "-"
        self.ack: str = "-"
        self.kcmp: KcmpVerdict | None = None
        self.kcmps: dict[str, KcmpVerdict] = {}
        self.mechanism = "vmm"
        self.consumers: int | None = None
        self.finished: SessionFinished | None = None
        self.handle: str = ""
        self.acks: dict[str, str] = {}
        self.size_told: Text | None = None
        if self.is_mounted:
            self.render_wire()

    def on_mount(self) -> None:
        self.render_wire()

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if isinstance(e, SessionStarted):
            self.started(e)
        elif isinstance(e, StepDone):
            self.step_done(e)
        elif isinstance(e, KcmpVerdict):
            self.set_kcmp(e)
        elif isinstance(e, SessionFinished):
            self.finished = e
            self.render_wire()

    def started(self, e: SessionStarted) -> None:
        self.socket_path = e.socket_path
        self.mechanism, self.consumers = e.mechanism, len(e.consumers)
        self.render_wire()

    def step_done(self, e: StepDone) -> None:
        r, s = e.report, e.report.state
        if kind(r.role) == "consumer" and base(r.step) == "import" and s.size_source:
            self.size_told = size_line(s.size_claimed, s.size_reported, s.size_source, r.ok)
            self.render_wire()
        if not r.ok:
            return
        role, step = kind(r.role), base(r.step)
        peer = peer_of(r.step)
        if (role, step) == ("producer", "listen"):
            self.listening = True
        elif (role, step) == ("producer", "accept"):
            p = s.peers.get(peer)
            self.peer = (
                f"{peer} pid {self.fmt.pid(p.pid if p else None)} "
                f"(SO_PEERCRED uid {p.uid if p else None})"
            )
            if s.refused:
                self.peer += f"; refused {len(s.refused)} intruder(s)"
        elif (role, step) == ("producer", "send"):
            sent = encode(s.sent) if s.sent is not None else {}
            self.metadata = {
                k: v
                for k, v in sent.items()
                if k not in HIDDEN_METADATA and (k not in UNSAID or v != UNSAID[k])
            }
            if s.sent is not None and s.sent.export_data:
                self.handle = s.sent.export_data
            if s.mapping.ipc_handle:
                self.handle = s.mapping.ipc_handle
                self.in_flight = f"no fd: 64 handle bytes in the message → {peer}"
            elif s.sent is not None and s.sent.transport == "pidfd":
                self.in_flight = (
                    f"no fd in the message: pid {self.fmt.pid(s.sent.pid)} and fd number "
                    f"{s.sent.fd} → {peer}; it takes the fd with pidfd_getfd …"
                )
            else:
                self.in_flight = f"producer fd {s.exported_fd} → SCM_RIGHTS → {peer} …"
        elif (role, step) == ("consumer", "receive"):
            taken = s.received is not None and s.received.transport == "pidfd"
            self.in_flight = (
                "handle bytes arrived; no new fd in " + r.role
                if s.mapping.ipc_handle
                else f"taken by {r.role} with pidfd_open + pidfd_getfd: fd {s.received_fd} there"
                if taken
                else f"arrived as {r.role} fd {s.received_fd}"
            )
        elif (role, step) == ("producer", "wait_ack"):
            ack = s.acks.get(peer)
            verified = bool(ack and ack.verified)
            what = (
                f"slice {ack.slice[0]}–{ack.slice[1]} written"
                if ack and ack.slice
                else f"{ack.checked if ack else 0} integers"
            )
            self.acks[peer] = f"{'ok' if verified else 'FAILED'} ({what})"
            if len(self.acks) == 1:
                self.ack = f"{'verified' if verified else 'FAILED'} ({what})"
            else:
                good = sum(1 for a in self.acks.values() if a.startswith("ok"))
                self.ack = f"{good}/{len(self.acks)} consumers acknowledged; last: {peer} {self.acks[peer]}"
        elif (role, step) == ("producer", "cleanup"):
            self.listening = False
        self.render_wire()

    def set_kcmp(self, verdict: KcmpVerdict) -> None:
        self.kcmp = verdict
        self.kcmps[verdict.consumer] = verdict
        self.render_wire()

    def kcmp_summary(self) -> Text | None:
        """narration's summary: of SessionFinished's verdicts once the session got there, else of those seen."""
        if self.finished is not None:
            return say.kcmp_summary(
                self.finished.kcmp or self.kcmps.values(), self.finished.mechanism, self.consumers
            )
        return say.kcmp_summary(self.kcmps.values(), self.mechanism) if self.kcmps else None

    def render_wire(self) -> None:
        d = self.fmt
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        t.add_row(
            "socket",
            Text(
                d.text(self.socket_path) + (" (listening)" if self.listening else ""),
                overflow="fold",
            ),
        )
        t.add_row("peer", d.text(self.peer))
        t.add_row("metadata", json.dumps(self.metadata) if self.metadata else "-")
        if self.handle:
            # 12 bytes a line: the widest that fits the panel's value column, so no byte is cut
            lines = [self.handle[i : i + 24] for i in range(0, len(self.handle), 24)]
            t.add_row("handle", Text("\n".join(lines), style="bold"))
        t.add_row("fd", self.in_flight)
        if self.size_told is not None:
            t.add_row("size", self.size_told)
        summary = self.kcmp_summary()
        if summary is not None:
            t.add_row("kcmp", summary)
        t.add_row("ACK", self.ack)
        self.update(t)


def size_line(claimed: int, reported: int | None, source: str, ok: bool) -> Text:
    """``size claimed 64 MiB · size the kernel reports 4 KiB (fstat)``, red when the consumer refused."""
    who = "the kernel" if source.startswith("kernel") else "the driver"
    told = format_size(reported) if reported is not None else "nothing it can tell"
    return Text(
        f"size claimed {format_size(claimed)} · size {who} reports {told} ({source.split(' ', 1)[-1]})",
        style="" if ok else "bold red",
    )


class VerificationPanel(EventView, Static):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "verification"
        self.result: Verification | None = None

    def on_mount(self) -> None:
        self.render_result()

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if (
            isinstance(e, StepDone)
            and base(e.step) == "verify"
            and e.report.state.verification is not None
        ):
            self.set_result(e.report.state.verification)

    def reset(self) -> None:
        self.set_result(None)

    def set_result(self, result: Verification | None) -> None:
        self.result = result
        self.render_result()

    def render_result(self) -> None:
        if self.result is None:
            self.update(Text("not yet verified", style="dim"))
        else:
            self.update(say.verification(self.result))
