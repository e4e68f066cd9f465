"""Go to any step: type its number and enter, or pick it from the list of the frames."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from vmmtui.record.timeline import Frame


class StepPicker(ModalScreen[int | None]):
    """Dismisses with a frame index, or None when cancelled."""

    DEFAULT_CSS = """
    StepPicker { align: center middle; }
    StepPicker > Vertical { width: 70; height: auto; max-height: 90%; border: heavy $accent; background: $surface; }
    StepPicker OptionList { height: auto; max-height: 24; }
    """
    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, frames: list[Frame], current: int):
        super().__init__()
        self.frames = frames
        self.current = current

    def compose(self) -> ComposeResult:
        last = max((f.steps for f in self.frames), default=0)
        with Vertical():
            yield Static(
                f"Go to step 0–{last} (0: the start): type a number and enter, or pick one. escape: cancel"
            )
            yield Input(placeholder="step number", type="integer", id="step-number")
            yield OptionList(
                *[Option(f.label, id=str(i)) for i, f in enumerate(self.frames)], id="step-list"
            )

    def on_mount(self) -> None:
        self.query_one(OptionList).highlighted = self.current
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            steps = int(event.value)
        except ValueError:
            return
        best = 0
        for i, f in enumerate(self.frames):
            if f.steps <= steps and not f.closing:
                best = i
        self.dismiss(best)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))

    def action_cancel(self) -> None:
        self.dismiss(None)
