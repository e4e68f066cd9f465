"""The wire between the two processes: socket, peer, metadata, the fd in flight, the ACK, and the
kernel's verdict on the fd pair; and the verification result."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from vmmtui.backends.pattern import Verification
from vmmtui.view import Display, ScreenState, WireView
from vmmtui.words import narration as say
from vmmtui.words.sizes import format_size


class WirePanel(Static):
    """The wire of the state shown."""

    def __init__(self, display: Display, **kw):
        super().__init__(**kw)
        self.fmt = display
        self.border_title = "the wire"
        self._key: tuple = ()

    def show(self, state: ScreenState) -> None:
        key = (state.wire, state.mechanism, len(state.roles) - 1)
        if key == self._key:
            return
        self._key = key
        self.update(self._text(*key))

    def _text(self, w: WireView, mechanism: str, consumers: int) -> Table:
        d = self.fmt
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        t.add_row(
            "socket",
            Text(d.text(w.socket_path) + (" (listening)" if w.listening else ""), overflow="fold"),
        )
        t.add_row("peer", d.text(w.peer))
        t.add_row("metadata", w.metadata or "-")
        if w.handle:
            # 12 bytes a line: the widest that fits the panel's value column, so no byte is cut
            lines = [w.handle[i : i + 24] for i in range(0, len(w.handle), 24)]
            t.add_row("handle", Text("\n".join(lines), style="bold"))
        t.add_row("fd", w.in_flight)
        if w.size_told is not None:
            s = w.size_told
            t.add_row("size", size_line(s.claimed, s.reported, s.source, s.ok))
        if w.finished is not None:
            t.add_row(
                "kcmp",
                say.kcmp_summary(
                    w.finished.kcmp or w.kcmps.values(), w.finished.mechanism, consumers
                ),
            )
        elif w.kcmps:
            t.add_row("kcmp", say.kcmp_summary(w.kcmps.values(), mechanism))
        t.add_row("ACK", w.ack)
        return t


def size_line(claimed: int, reported: int | None, source: str, ok: bool) -> Text:
    """``size claimed 64 MiB · size the kernel reports 4 KiB (fstat)``, red when the consumer refused."""
    who = "the kernel" if source.startswith("kernel") else "the driver"
    told = format_size(reported) if reported is not None else "nothing it can tell"
    return Text(
        f"size claimed {format_size(claimed)} · size {who} reports {told} ({source.split(' ', 1)[-1]})",
        style="" if ok else "bold red",
    )


class VerificationPanel(Static):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "verification"
        self.result: Verification | None = None
        self._shown = False

    def show(self, state: ScreenState) -> None:
        if self._shown and state.verification is self.result:
            return
        self._shown, self.result = True, state.verification
        if self.result is None:
            self.update(Text("not yet verified", style="dim"))
        else:
            self.update(say.verification(self.result))
