"""Every key of the inspector, once, with the modes it works in: the live app's and the replay's
BINDINGS, the footer, the help screen's table and the command palette are all made from this table.

Ordered for the footer, which cuts what does not fit: at 80 columns it must still show next, quit
and help, so those come first and the labels are short; ``?`` lists every key.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

LIVE, REPLAY, TRACE = "live", "replay", "trace"
#: the student page (``replay --html``): a replay's keys that its script handles too
PAGE = "page"
#: every mode: the demo's live app, a replay (of a session or a trace) and a live trace
BOTH = frozenset({LIVE, REPLAY, TRACE})
#: keys that go back and forth through frames while the frames still come (the demo, a trace)
LIVE_FRAMES = frozenset({LIVE, TRACE})

#: (binding, the modes it belongs to)
TABLE: list[tuple[Binding, frozenset[str]]] = [
    (Binding("space", "step", "Next", tooltip="run the next step of the plan"), frozenset({LIVE})),
    (
        Binding(
            "space,right", "step", "Next", tooltip="the next step of the recording", priority=True
        ),
        frozenset({REPLAY, PAGE}),
    ),
    (
        Binding(
            "n",
            "search_next",
            "Next match",
            show=False,
            tooltip="the next match of the search (/); live, with no search: the next step",
        ),
        BOTH,
    ),
    (
        Binding("N", "search_previous", "Previous match", show=False, tooltip="the previous match"),
        BOTH,
    ),
    (Binding("q", "quit", "Quit", tooltip="quit (cleans up first)"), BOTH),
    (
        Binding(
            "ctrl+c",
            "interrupt",
            "Interrupt",
            show=False,
            priority=True,
            tooltip="quit as SIGINT would (cleans up first; exit status 130)",
        ),
        BOTH,
    ),
    (Binding("question_mark", "help", "Help", tooltip="every key and what the panels show"), BOTH),
    (
        Binding(
            "left",
            "back",
            "Back",
            tooltip="step back: the panels as they were after the previous step or call "
            "(a live session or trace goes on where it is)",
            priority=True,
        ),
        frozenset({LIVE, REPLAY, TRACE, PAGE}),
    ),
    (
        Binding(
            "right",
            "forward",
            "Forward",
            show=False,
            tooltip="looking back: one step forward",
            priority=True,
        ),
        LIVE_FRAMES,
    ),
    (
        Binding("r", "run_all", "Run all", tooltip="run every remaining step to the end"),
        frozenset({LIVE}),
    ),
    (
        Binding("home", "first", "First", tooltip="back to the start", priority=True),
        frozenset({REPLAY, TRACE, PAGE}),
    ),
    (
        Binding("end", "last", "Last", tooltip="the end of the recording", priority=True),
        frozenset({REPLAY, PAGE}),
    ),
    (
        Binding(
            "home",
            "first",
            "First",
            show=False,
            tooltip="back to the start: the panels before step 1 (the session stays where it is)",
            priority=True,
        ),
        frozenset({LIVE}),
    ),
    (Binding("r", "last", "Last", show=False, priority=True), frozenset({REPLAY})),
    (Binding("ctrl+r", "first", "First", show=False, priority=True), frozenset({REPLAY})),
    (
        Binding(
            "end,escape",
            "live",
            "Live",
            show=False,
            tooltip="back to live after looking back",
            priority=True,
        ),
        LIVE_FRAMES,
    ),
    (Binding("g", "goto", "Go to", tooltip="go to any step: type its number or pick it"), BOTH),
    (
        Binding(
            "right_square_bracket",
            "chapter(1)",
            "Next note",
            show=False,
            tooltip="--notes: the next step with a teacher's note; a trace: the next finding",
        ),
        frozenset({REPLAY, TRACE, PAGE}),
    ),
    (
        Binding(
            "left_square_bracket",
            "chapter(-1)",
            "Previous note",
            show=False,
            tooltip="--notes: the previous step with a teacher's note; a trace: the previous finding",
        ),
        frozenset({REPLAY, TRACE, PAGE}),
    ),
    (
        Binding(
            "slash", "search", "Search", tooltip="search the event log; n / N: next / previous"
        ),
        BOTH,
    ),
    (
        Binding(
            "a", "autoplay", "Autoplay", tooltip="autoplay on/off: the steps play by themselves"
        ),
        frozenset({LIVE, REPLAY}),
    ),
    (
        Binding(
            "plus",
            "faster",
            "Faster",
            show=False,
            tooltip="autoplay: a shorter pause between steps",
        ),
        frozenset({LIVE, REPLAY}),
    ),
    (
        Binding(
            "minus",
            "slower",
            "Slower",
            show=False,
            tooltip="autoplay: a longer pause between steps",
        ),
        frozenset({LIVE, REPLAY}),
    ),
    (
        Binding(
            "ctrl+r",
            "restart",
            "Restart",
            tooltip="restart (workers stopped, everything cleaned, fresh session)",
        ),
        frozenset({LIVE}),
    ),
    (
        Binding(
            "c",
            "scenario",
            "Scenario",
            tooltip="pick a scenario: a normal run, or one failure made real (restarts the session)",
        ),
        frozenset({LIVE}),
    ),
    (
        Binding(
            "f",
            "fold",
            "All fds",
            tooltip="fold/unfold the fds that are not ours (/dev/nvidia*, stdio, pipes)",
        ),
        frozenset({LIVE, REPLAY}),
    ),
    (Binding("s", "screenshot", "Screenshot", tooltip="save an SVG screenshot"), BOTH),
    (
        Binding(
            "O",
            "output",
            "Output",
            tooltip="the traced command's own output: its stdout and stderr, kept while the "
            "inspector has the terminal (printed too when it closes)",
        ),
        frozenset({TRACE}),
    ),
    (
        Binding(
            "m",
            "more",
            "More",
            tooltip="a trace: open/close the list of the processes without a panel (wrappers, "
            "helpers); tab reaches it too",
        ),
        frozenset({REPLAY, TRACE}),
    ),
    (
        Binding(
            "o",
            "sort",
            "Sort",
            tooltip="a trace: sort the focused process's memory by time, size or who pins it "
            "(tab focuses the next process)",
        ),
        frozenset({REPLAY, TRACE}),
    ),
]


def bindings(mode: str) -> list[BindingType]:
    """The BINDINGS of one mode, in the table's order."""
    return [b for b, modes in TABLE if mode in modes]


#: the live inspector's keys (the README lists these)
KEYS = bindings(LIVE)


#: a Textual key's name in the browser (``KeyboardEvent.key``) and on the page's keys line
BROWSER_KEYS = {
    "space": (" ", "space"),
    "right": ("ArrowRight", "→"),
    "left": ("ArrowLeft", "←"),
    "home": ("Home", "Home"),
    "end": ("End", "End"),
    "right_square_bracket": ("]", "]"),
    "left_square_bracket": ("[", "["),
}


def page_keys() -> list[dict[str, object]]:
    """The page's keys, from the table (the bindings marked ``PAGE``): for each, the browser's
    key names, how the keys line shows them, the action and its description."""
    out: list[dict[str, object]] = []
    for b, modes in TABLE:
        if PAGE not in modes or not isinstance(b, Binding):
            continue
        names = [k.strip() for k in b.key.split(",")]
        out.append(
            {
                "keys": [BROWSER_KEYS[k][0] for k in names],
                "shown": " / ".join(BROWSER_KEYS[k][1] for k in names),
                "action": b.action,
                "description": b.description,
            }
        )
    return out
