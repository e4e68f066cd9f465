"""The wire between the two processes: socket, peer, metadata, the fd in flight, the ACK, and the
kernel's verdict on the fd pair; and the verification result."""

from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from vmmtui.events import KcmpVerdict, SessionStarted, StepDone
from vmmtui.steps import base, kind, peer_of
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
        self.kcmps: dict[str, KcmpVerdict] = {}
        self.handle: str = ""
        self.acks: dict[str, str] = {}
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
        role, step = kind(r.role), base(r.step)
        peer = peer_of(r.step)
        if (role, step) == ("producer", "listen"):
            self.listening = True
        elif (role, step) == ("producer", "accept"):
            self.peer = f"{peer} pid {self.fmt.pid(s.get('peer_pid'))} (SO_PEERCRED uid {s.get('peer_uid')})"
            refused = s.get("refused") or []
            if refused:
                self.peer += f"; refused {len(refused)} intruder(s)"
        elif (role, step) == ("producer", "send"):
            self.metadata = {k: v for k, v in (s.get("sent_metadata") or {}).items() if k != "ipc_handle"}
            if s.get("ipc_handle"):
                self.handle = s["ipc_handle"]
                self.in_flight = f"no fd: 64 handle bytes in the message → {peer}"
            else:
                self.in_flight = f"producer fd {s.get('exported_fd')} → SCM_RIGHTS → {peer} …"
        elif (role, step) == ("consumer", "receive"):
            self.in_flight = ("handle bytes arrived; no new fd in " + r.role if s.get("ipc_handle")
                              else f"arrived as {r.role} fd {s.get('received_fd')}")
        elif (role, step) == ("producer", "wait_ack"):
            ack = s.get("ack") or {}
            what = (f"slice {ack['slice'][0]}–{ack['slice'][1]} written" if ack.get("slice")
                    else f"{ack.get('checked', 0)} integers")
            self.acks[peer] = f"{'ok' if ack.get('verified') else 'FAILED'} ({what})"
            if len(self.acks) == 1:
                self.ack = f"{'verified' if ack.get('verified') else 'FAILED'} ({what})"
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
        if self.handle:
            lines = [self.handle[i:i + 32] for i in range(0, len(self.handle), 32)]
            t.add_row("handle", Text("\n".join(lines), style="bold"))
        t.add_row("fd", self.in_flight)
        if len(self.kcmps) > 1:
            same = sum(1 for v in self.kcmps.values() if v.same)
            t.add_row("kcmp", Text(f"{same}/{len(self.kcmps)} consumers' fds ≡ producer fd {self.kcmp.producer_fd}",
                                   style="bold green" if same == len(self.kcmps) else "bold red"))
        elif self.kcmp:
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
