"""The architecture holds: packages that stack in one order, no import cycle, small modules.

The house is one list of layers, the ground floor first (``LAYERS``). A package imports only
itself and the packages below it; ``stream/``, the event vocabulary every layer reads, imports
nothing of ours but itself. So the layers below ``words/`` build no sentence from our words, the
model below the screen knows no screen, the sources know no model, and storage runs no pipeline,
each without a rule of its own. docs/layout.md draws the same order.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "vmmtui"
#: the layers, ground floor first: each package may import only the packages before it.
#: "vmmtui" is the root package's own module (it takes the stop signals, ``system.early``),
#: "__main__" is ``python -m vmmtui``
LAYERS = [
    "stream",  # the event vocabulary: events, value types, the codec, names and sizes
    "system",  # this host and this process: signals, output, fd tables, lifeline
    "backends",  # the driver and system calls that make, share and map memory
    "wire",  # the sockets between our own processes
    "plan",  # what a session is asked to do
    "scenarios",  # the failures to make real
    "worker",  # one role's steps in its own process
    "trace",  # the sources of a trace: eBPF and polling
    "session",  # launches and drives the workers (follows them with the trace's probe)
    "model",  # the world of observed programs as data: the ledger, findings, refcounts
    "record",  # recordings: write, read, cut into frames
    "view",  # the screen's state: a fold of the events, no words
    "words",  # every sentence, made from the facts
    "pipeline",  # a run: a source into the model and its sinks; a recording replayed
    "doctor",  # what this machine can run, asked of every layer
    "render",  # the console, transcripts, the page, Perfetto
    "fleet",  # the node agent's exporters
    "bench",  # measurement
    "tui",  # the Textual app
    "cli",  # one thin module per command
    "verdict",  # the verdict as an assertion: vmmtui.tracing and the pytest plugin
    "__main__",
    "vmmtui",
]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The vmmtui modules ``path`` imports anywhere (lazy imports included, TYPE_CHECKING blocks not)."""
    tree = ast.parse(path.read_text())
    skip = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("vmmtui")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            if not base.startswith("vmmtui"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    return {m for m in out if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, name, known) for name, path in known.items()}


def test_no_module_is_a_sprawl():
    """Cohesion is judged in review, not by a line count that invites mixins made only to stay
    under it; this only catches a module that has plainly grown into several (ruff-formatted)."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in PACKAGE.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 900
    }
    assert not long, long


def test_no_import_cycle():
    g = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(g[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(g):
        if node not in state and (cycle := visit(node)):
            pytest.fail("import cycle: " + " → ".join(cycle))


def layer_of(module: str) -> str:
    """The layer a module lives in: its package under vmmtui (``vmmtui`` for the root's own)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward(g: dict[str, set[str]], layers: list[str]) -> list[str]:
    """Every import in ``g`` that runs from a layer to one above it (or to a package ``layers``
    does not place), one line each. Within a layer, anything goes (the cycle test watches it)."""
    rank = {name: i for i, name in enumerate(layers)}
    bad = []
    for module, deps in sorted(g.items()):
        here = layer_of(module)
        for dep in sorted(deps):
            there = layer_of(dep)
            if here == there:
                continue
            if here not in rank or there not in rank:
                bad.append(f"{module} → {dep}: {here if here not in rank else there} has no layer")
            elif rank[there] > rank[here]:
                bad.append(f"{module} → {dep}: {there} is above {here}")
    return bad


def test_every_package_has_its_layer():
    found = {layer_of(m) for m in modules()}
    assert found == set(LAYERS), (sorted(found - set(LAYERS)), sorted(set(LAYERS) - found))


def test_a_package_imports_only_the_packages_below_it():
    bad = upward(graph(), LAYERS)
    assert not bad, "\n".join(bad)


def test_the_stream_imports_nothing_of_ours_but_itself():
    """The event vocabulary is the ground floor: a worker, a renderer and a reader of recordings
    all load it, and it drags none of them in."""
    bad = [
        f"{m} → {d}"
        for m, deps in graph().items()
        if layer_of(m) == "stream"
        for d in sorted(deps)
        if layer_of(d) != "stream"
    ]
    assert LAYERS[0] == "stream" and not bad, bad


def test_words_are_made_only_at_the_edge():
    """No layer below words/ imports it: backends, workers, sources, the model and the screen's
    fold emit facts (a failure's code, a leak's fd kind, how a process ended), worded where drawn."""
    below = set(LAYERS[: LAYERS.index("words")])
    bad = [
        f"{m} → {d}"
        for m, deps in graph().items()
        if layer_of(m) in below
        for d in sorted(deps)
        if layer_of(d) == "words"
    ]
    assert not bad, bad


def test_the_rule_catches_an_import_planted_upward(tmp_path, monkeypatch):
    """The checker on a real module tree with one import running up (model → tui) and one
    running down: it names the upward one, and only it."""
    pkg = tmp_path / "vmmtui"
    for name, body in {
        "__init__.py": "",
        "model/__init__.py": "",
        "model/ledger.py": "from vmmtui.stream.events import Event\nimport vmmtui.tui.app\n",
        "stream/__init__.py": "",
        "stream/events.py": "class Event: ...\n",
        "tui/__init__.py": "",
        "tui/app.py": "from vmmtui.model import ledger\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(body)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    g = graph()
    assert g["vmmtui.model.ledger"] == {"vmmtui.stream.events", "vmmtui.tui.app"}
    assert upward(g, ["stream", "model", "tui", "vmmtui"]) == [
        "vmmtui.model.ledger → vmmtui.tui.app: tui is above model"
    ]
    assert upward(g, ["stream", "tui", "model", "vmmtui"]) == [
        "vmmtui.tui.app → vmmtui.model.ledger: model is above tui"
    ]
    assert upward(g, ["model", "tui", "vmmtui"]) == [
        "vmmtui.model.ledger → vmmtui.stream.events: stream has no layer",
        "vmmtui.model.ledger → vmmtui.tui.app: tui is above model",
    ]


def test_below_the_renderers_nothing_loads_textual():
    """Every module of every layer below words/ imports without loading Textual: the workers,
    the sources and the model start fast and run where no terminal is."""
    below = set(LAYERS[: LAYERS.index("words")])
    names = sorted(
        m
        for m, path in modules().items()
        if layer_of(m) in below and path.name != "__main__.py" and "gallery" not in m
    )
    code = (
        "import importlib, sys\n"
        f"for m in {names!r}: importlib.import_module(m)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_no_scenario_name_outside_the_scenarios_package():
    from vmmtui.scenarios import SCENARIOS

    found = []
    for path in PACKAGE.rglob("*.py"):
        if "scenarios" in path.relative_to(PACKAGE).parts:
            continue
        text = path.read_text()
        found += [
            f"{path.relative_to(ROOT)}: {name}"
            for name in SCENARIOS
            if f'"{name}"' in text or f"'{name}'" in text
        ]
    assert not found, found


def test_every_package_directory_is_a_package():
    """setuptools' find (pyproject) ships only directories with an __init__.py: a `pip install .` of
    a namespace directory would leave it out while the editable install still works."""
    missing = [
        str(d.relative_to(ROOT))
        for d in PACKAGE.rglob("*")
        if d.is_dir()
        and d.name != "__pycache__"
        and any(d.glob("*.py"))
        and not (d / "__init__.py").exists()
    ]
    assert not missing, missing


#: the folders of tests/ that are no package's: data a test reads, and the whole sessions and
#: traces on a GPU (they cross every layer, skipped where no GPU is)
_TESTS_OF_NO_PACKAGE = {"fixtures", "data", "gpu"}


def test_the_tests_mirror_the_house():
    """A package's tests live in tests/<package>/, so that a change to one package finds its tests
    beside it; the top of tests/ keeps the shared helpers (tests/commands.py runs the CLI and reads
    a screen) and the tests of the house as a whole."""
    tests = ROOT / "tests"
    top = sorted(p.name for p in tests.iterdir() if p.is_file() and p.suffix == ".py")
    assert len(top) <= 12, top
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    assert not folders - set(LAYERS) - _TESTS_OF_NO_PACKAGE, folders - set(LAYERS)


# -- the screen ---------------------------------------------------------------------------------
#: what signals a process (the session does, on the screen's word)
_SIGNALS = ("os.kill", "os.killpg", "signal.pidfd_send_signal", "signal.pthread_kill")


def test_the_screen_never_reads_proc_nor_signals_a_process():
    """The TUI draws what the session tells it; it asks the session to stop a run. A path under
    /proc in its code, or a call that sends a signal, is the observer's work done in the wrong
    place (docstrings and help text may speak of /proc)."""
    bad = []
    for path in (PACKAGE / "tui").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docs = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in docs:
                if isinstance(node.value, str) and node.value.lstrip("'\"").startswith("/proc"):
                    bad.append(f"{where}:{node.lineno} reads {node.value[:30]!r}")
            elif isinstance(node, ast.Call):
                called = ast.unparse(node.func)
                if called in _SIGNALS or called.endswith((".send_signal", "os.kill")):
                    bad.append(f"{where}:{node.lineno} calls {called}")
    assert not bad, bad
