"""Every key of the inspector, once: the footer, the help screen's table and the command palette
are made from these.

Ordered for the footer, which cuts what does not fit: at 80 columns it must still show next, quit
and help, so those come first and the labels are short.
"""

from __future__ import annotations

from textual.binding import Binding

KEYS = [
    Binding("space", "step", "Next", tooltip="run the next step of the plan"),
    Binding("n", "step", "Next step", show=False),
    Binding("q", "quit", "Quit", tooltip="quit (cleans up first)"),
    Binding("question_mark", "help", "Help", tooltip="keys and what the panels show"),
    Binding("r", "run_all", "Run all", tooltip="run every remaining step to the end"),
    Binding("a", "autoplay", "Autoplay", tooltip="autoplay on/off: the steps play by themselves"),
    Binding(
        "plus", "faster", "Faster", show=False, tooltip="autoplay: a shorter pause between steps"
    ),
    Binding(
        "minus", "slower", "Slower", show=False, tooltip="autoplay: a longer pause between steps"
    ),
    Binding(
        "ctrl+r",
        "restart",
        "Restart",
        tooltip="restart (workers stopped, everything cleaned, fresh session)",
    ),
    Binding(
        "c",
        "scenario",
        "Scenario",
        tooltip="pick a scenario: a normal run, or one failure made real (restarts the session)",
    ),
    Binding(
        "f",
        "fold",
        "All fds",
        tooltip="fold/unfold the fds that are not ours (/dev/nvidia*, stdio, pipes)",
    ),
    Binding("s", "screenshot", "Screenshot", tooltip="save an SVG screenshot"),
]
