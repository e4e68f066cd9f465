"""The scenario picker: a normal run or one failure from the troubleshooting table, made real."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from vmmtui.scenarios import SCENARIOS

NORMAL = "normal"


class ScenarioScreen(ModalScreen[str | None]):
    """Dismisses with a scenario name, NORMAL for a plain run, or None when cancelled."""

    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, backend: str, current: str | None):
        super().__init__()
        self.backend = backend
        self.current = current

    def compose(self) -> ComposeResult:
        options = [
            Option(Text.assemble(("normal run", "bold"), "  share, verify, clean up"), id=NORMAL)
        ]
        for s in SCENARIOS.values():
            why_not = s.why_not(self.backend)
            label = Text.assemble((s.name, "bold"), f"  {s.summary}")
            if why_not:
                where = self.backend if self.backend in s.cannot else "this host"
                label.append(f"\n  not on {where}: {why_not}", style="dim italic")
            options.append(Option(label, id=s.name, disabled=bool(why_not)))
        with Vertical(id="scenarios"):
            yield Static(
                Text(
                    f"Pick a scenario (backend: {self.backend}); it restarts the session. "
                    "escape: cancel",
                    style="bold",
                )
            )
            yield OptionList(*options, id="scenario-list")

    def on_mount(self) -> None:
        picker = self.query_one(OptionList)
        picker.highlighted = picker.get_option_index(self.current or NORMAL)
        picker.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
