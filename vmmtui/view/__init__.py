"""The inspector's view model: ``state = fold(events)``, one immutable ``ScreenState`` per frame.

Everything a screen shows (each worker's panel and fd table, the wire, the verification, the next
step, the scenario, the event log) is folded from the one event stream by pure functions; live,
replay and step back all show "the state at frame N" (``FrameStates`` caches one per frame). The
TUI renders these states and holds none of its own. No Textual here.
"""

from vmmtui.view.display import Display
from vmmtui.view.frames import FrameStates
from vmmtui.view.model import LogLine, PanelView, ScreenState, WireView, fold, fold_one

__all__ = [
    "Display",
    "FrameStates",
    "LogLine",
    "PanelView",
    "ScreenState",
    "WireView",
    "fold",
    "fold_one",
]
