"""The wire between the two processes: socket, peer, metadata, the fd in flight, the ACK, and the
kernel's verdict on the fd pair; and the verification result."""

from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from vmmtui.events import KcmpVerdict, SessionStarted, StepDone
from vmmtui.widgets.display import Display


class WirePanel(Static):
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
        if self.is_mounted:
            self.render_wire()

    def on_mount(self) -> None:
        self.render_wire()

    def started(self, e: SessionStarted) -> None:
        self.socket_path = e.socket_path
        self.render_wire()

    def step_done(self, e: StepDone) -> None:
        r, s = e.report, e.report.state
        if not r.ok:
            return
        if (r.role, r.step) == ("producer", "listen"):
            self.listening = True
        elif (r.role, r.step) == ("producer", "accept"):
            self.peer = f"consumer pid {self.fmt.pid(s.get('peer_pid'))} (SO_PEERCRED uid {s.get('peer_uid')})"
            refused = s.get("refused") or []
            if refused:
                self.peer += f"; refused {len(refused)} intruder(s)"
        elif (r.role, r.step) == ("producer", "send"):
            self.metadata = s.get("sent_metadata")
            self.in_flight = f"producer fd {s.get('exported_fd')} → SCM_RIGHTS → …"
        elif (r.role, r.step) == ("consumer", "receive"):
            self.in_flight = f"arrived as consumer fd {s.get('received_fd')}"
        elif (r.role, r.step) == ("producer", "wait_ack"):
            ack = s.get("ack") or {}
            self.ack = f"{'verified' if ack.get('verified') else 'FAILED'} ({ack.get('checked', 0)} integers)"
        elif (r.role, r.step) == ("producer", "cleanup"):
            self.listening = False
        self.render_wire()

    def set_kcmp(self, verdict: KcmpVerdict) -> None:
        self.kcmp = verdict
        self.render_wire()

    def render_wire(self) -> None:
        d = self.fmt
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        t.add_row("socket", d.text(self.socket_path) + (" (listening)" if self.listening else ""))
        t.add_row("peer", d.text(self.peer))
        meta = "-"
        if self.metadata:
            m = {k: v for k, v in self.metadata.items() if k not in ("type", "v")}
            meta = json.dumps(m)
        t.add_row("metadata", meta)
        t.add_row("fd", self.in_flight)
        if self.kcmp:
            style = {True: "bold green", False: "bold red", None: "yellow"}[self.kcmp.same]
            t.add_row("kcmp", Text(self.kcmp.describe(), style=style))
        t.add_row("ACK", self.ack)
        self.update(t)


class VerificationPanel(Static):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "verification"
        self.result: dict | None = None

    def on_mount(self) -> None:
        self.render_result()

    def set_result(self, result: dict | None) -> None:
        self.result = result
        self.render_result()

    def render_result(self) -> None:
        v = self.result
        if not v:
            self.update(Text("not yet verified", style="dim"))
            return
        if v.get("passed"):
            self.update(Text.assemble(("PASSED ", "bold green"), f"{v['checked']} integers verified"))
            return
        text = Text.assemble(("FAILED ", "bold red"), f"{v.get('mismatches')} of {v.get('checked')} differ")
        if v.get("first_index") is not None:
            text.append(f"\nfirst at index {v['first_index']}: expected 0x{v['first_expected']:08x}, "
                        f"got 0x{v['first_got']:08x}")
        self.update(text)
