"""The inspector's first frame imports only what it needs (issue 24): counted as modules in a fresh
interpreter against a bare Textual app's (one screen, a header and a panel), never timed.

Start-up time itself is measured by scripts/startup-time.py (the inspector's first frame as a
multiple of the bare app's), not here: a test never asserts speed.
"""

import json
import subprocess
import sys

BARE = "from textual.app import App\nfrom textual.widgets import Header, Static\n"
#: what ``python -m vmmtui`` imports before its first frame: the command line, the inspector's
#: command, the backends' chooser (the probe itself runs in a thread) and the app
INSPECTOR = (
    "import vmmtui.__main__, vmmtui.cli, vmmtui.cli.inspector, vmmtui.backends\n"
    "from vmmtui.tui.app import InspectorApp\n"
)
#: vmmtui, textual and rich modules beyond the bare app's: 55 (the status line's words, ``words.status``;the panels' row budget, the panels'
#: one view type for every source and the platform check are on the first frame's path, and seven of them are the packages'
#: docstring-only ``__init__`` modules: stream, wire, words, plan, system, record, tui.widgets;
#: the stop signals' handlers bring our output after one, ``system.output``, stdlib only);
#: no other command's module, no tabs for one consumer: keep it near the floor
BUDGET = 55
#: never on the first frame's path: the bench, attach, recordings, the workers' side, the drivers
FORBIDDEN = (
    "numpy",
    "cuda",
    "torch",
    "vmmtui.bench",
    "vmmtui.trace.procfs",
    "vmmtui.trace",
    "vmmtui.record.recording",
    "vmmtui.record.gallery",
    "vmmtui.session",
    "vmmtui.worker",
    "vmmtui.backends.cuda",
    "vmmtui.backends.memfd",
    "vmmtui.backends.probe",
    "vmmtui.tui.replay",
    "gzip",
    # the other commands, the tabs of several consumers, --transcript, --cast, search, a trace's panels
    "vmmtui.cli.run",
    "vmmtui.cli.trace",
    "vmmtui.cli.replay",
    "vmmtui.cli.serve",
    "textual.widgets._tabbed_content",
    "vmmtui.render.transcript",
    "vmmtui.tui.cast",
    "vmmtui.view.search",
    "vmmtui.tui.widgets.programs",
)
OURS = ("vmmtui", "textual", "rich")


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "import sys, json; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_the_first_frame_imports_stay_within_the_budget():
    bare = modules_after(BARE)
    inspector = modules_after(BARE + INSPECTOR)
    extra = sorted(inspector - bare)
    forbidden = [m for m in extra if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert forbidden == [], f"imported before the first frame: {forbidden}"
    ours = [m for m in extra if m.split(".")[0] in OURS]
    assert len(ours) <= BUDGET, f"{len(ours)} modules beyond a bare Textual app's: {ours}"


def test_the_command_line_alone_loads_no_backend_and_no_textual():
    """``vmmtui attach --once``, ``run``, ``bench``: the parser needs no backend class, no Textual."""
    mods = modules_after("import vmmtui.cli\n")
    heavy = [
        m
        for m in mods
        if m.split(".")[0] in ("textual", "rich", "numpy", "cuda")
        or m in ("vmmtui.backends.base", "vmmtui.stream.events", "concurrent.futures", "tempfile")
    ]
    assert heavy == []


def test_a_command_line_imports_only_the_command_it_names():
    """The parser carries every command's summary; a command's module (and what it imports) comes
    only when that command is parsed."""
    code = (
        "from vmmtui.cli import parser\n"
        "parser().parse_args(['attach', '--once', '1'])\n"
        "parser().parse_args(['--backend', 'memfd'])\n"
    )
    commands = {m for m in modules_after(code) if m.startswith("vmmtui.cli.")}
    assert commands == {"vmmtui.cli.attach", "vmmtui.cli.inspector", "vmmtui.cli.options"}
