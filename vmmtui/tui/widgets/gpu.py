"""The GPU panel of the trace inspector: the GPU ledger as of the newest NVML reading, one row a
process (charged, created, imported, pinned for others, orphaned), read from the state's
``GpuTable`` (``view/programs.py``), so a live trace and the replay of its recording draw the same
panel. Hidden until the stream has an NVML reading (no driver, ``--no-nvml``: no panel)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vmmtui.view import ScreenState
from vmmtui.words.gpu import table_lines


class GpuPanel(Static):
    """Who NVML charges and who really holds the memory, per GPU (``words/gpu.py``'s table)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "GPU memory: NVML's charge · who holds it"
        self._shown: object = None
        self.display = False

    def show(self, state: ScreenState) -> None:
        table = state.programs.gpu if state.programs is not None else None
        if table is self._shown:
            return
        self._shown = table
        self.display = table is not None
        if table is None:
            return
        lines = table_lines(table, sentences=False, short=True)
        text = Text()
        for i, line in enumerate(lines):
            style = "bold" if i == 0 or not line.startswith("  ") else ""
            if "orphaned" in line and "nothing orphaned" not in line and not line.startswith("  "):
                style = "bold yellow"
            text.append(line.strip() if not line.startswith("    ") else line, style=style)
            text.append("\n" if i < len(lines) - 1 else "")
        self.update(text)
