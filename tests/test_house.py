"""The architecture holds: packages that stack in one order, no import cycle, small modules.

The house is one list of layers, the ground floor first (``LAYERS``). A package imports only
itself and the packages below it; ``stream/``, the event vocabulary every layer reads, imports
nothing of ours but itself. So the layers below ``words/`` build no sentence from our words, the
model below the screen knows no screen, the sources know no model, and storage runs no pipeline,
each without a rule of its own. docs/layout.md draws the same order.
"""

import ast
import re
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


# -- sentences only in words/ -------------------------------------------------------------------
#: a sentence for a user: four words or more with spaces between them, in a string literal or an
#: f-string's text (a code such as ``held-after-exporter-died`` is one word; ``{}`` stands for a
#: value); docstrings and assert messages are for readers of the code and are not counted
_SENTENCE = re.compile(r"[A-Za-z]{2,}(?:[,;:'’()]*\s+[(']*[A-Za-z]{2,}){3,}")

#: the ratchet: the modules below words/ that still build sentences (issue 49 moves them up), with
#: how many strings each builds today. A module may build fewer, never more; a module not listed
#: builds none (emit a code and values and word them in words/); one that builds none leaves the
#: list. A refusal, a preflight's finding or a notice travels as a code, so that a recording
#: replayed by a later vmmtui shows that version's words and nothing parses a sentence back.
STILL_WORDED = {
    "vmmtui.backends": 12,
    "vmmtui.backends.base": 3,
    "vmmtui.backends.cuda": 2,
    "vmmtui.backends.cuda_size": 3,
    "vmmtui.backends.ipc_bytes": 1,
    "vmmtui.backends.kernel_image": 9,
    "vmmtui.backends.kernels": 3,
    "vmmtui.backends.labels": 2,
    "vmmtui.backends.memfd": 7,
    "vmmtui.backends.pidfd": 5,
    "vmmtui.backends.probe": 4,
    "vmmtui.model.findings": 1,
    "vmmtui.model.policy": 5,
    "vmmtui.plan.config": 16,
    "vmmtui.plan.steps": 70,
    "vmmtui.record.calls": 2,
    "vmmtui.record.gallery": 5,
    "vmmtui.record.notes": 13,
    "vmmtui.record.recording": 24,
    "vmmtui.record.writer": 7,
    "vmmtui.scenarios.actions": 8,
    "vmmtui.scenarios.catalogue": 50,
    "vmmtui.scenarios.rogue": 1,
    "vmmtui.session.fdchecks": 3,
    "vmmtui.session.kernel": 6,
    "vmmtui.session.loop": 3,
    "vmmtui.session.processes": 2,
    "vmmtui.session.tmpdir": 4,
    "vmmtui.stream.codec": 4,
    "vmmtui.stream.events": 2,
    "vmmtui.stream.observed": 1,
    "vmmtui.stream.sizes": 4,
    "vmmtui.stream.values": 1,
    "vmmtui.system.fdtable": 7,
    "vmmtui.system.host": 4,
    "vmmtui.system.interrupts": 1,
    "vmmtui.trace.command": 2,
    "vmmtui.trace.elfsyms": 1,
    "vmmtui.trace.loader": 24,
    "vmmtui.trace.polling": 4,
    "vmmtui.trace.procfs.follow": 11,
    "vmmtui.trace.procfs.lifecycle": 6,
    "vmmtui.trace.procfs.preflight": 1,
    "vmmtui.trace.procfs.shares": 3,
    "vmmtui.trace.tracer": 6,
    "vmmtui.wire.channel": 10,
    "vmmtui.wire.protocol": 2,
    "vmmtui.worker.consumer": 13,
    "vmmtui.worker.core": 5,
    "vmmtui.worker.memory": 10,
    "vmmtui.worker.producer": 11,
    "vmmtui.worker.sharing": 37,
    "vmmtui.worker.transport": 17,
}


def sentences(path: Path) -> list[tuple[int, str]]:
    """The string literals of ``path`` that read as a sentence (``_SENTENCE``), with their lines."""
    tree = ast.parse(path.read_text())
    skip = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    skip |= {
        id(n) for node in ast.walk(tree) if isinstance(node, ast.Assert) for n in ast.walk(node)
    }
    parts = {
        id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values
    }
    found = []
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in parts:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        else:
            continue
        if _SENTENCE.search(text):
            found.append((node.lineno, text))
    return sorted(found)


def worded_below() -> dict[str, list[tuple[int, str]]]:
    """Each module below words/ that builds sentences, with them."""
    below = set(LAYERS[: LAYERS.index("words")])
    return {
        name: found
        for name, path in sorted(modules().items())
        if layer_of(name) in below and (found := sentences(path))
    }


def ratchet(found: dict[str, list[tuple[int, str]]], allowed: dict[str, int]) -> list[str]:
    """What breaks the ratchet, one line each: a module building more sentences than it may (its
    newest first lines shown), and a listed module that builds none now (drop it)."""
    bad = []
    for name, said in found.items():
        if len(said) > allowed.get(name, 0):
            shown = "; ".join(f"{line}: {text[:60]!r}" for line, text in said[:3])
            bad.append(
                f"{name} builds {len(said)} sentences, {allowed.get(name, 0)} allowed below words/"
                f" (emit a code and its values; word them in words/): {shown}"
            )
    bad += [
        f"{name} builds no sentence now: drop it from STILL_WORDED"
        for name in allowed
        if name not in found
    ]
    return bad


def test_below_words_no_module_builds_a_sentence_for_a_user():
    """Modules below words/ emit codes and values; every sentence a user reads is made in words/.
    What is still below is listed, with its count, in ``STILL_WORDED``, and may only shrink."""
    bad = ratchet(worded_below(), STILL_WORDED)
    assert not bad, "\n".join(bad)


def test_the_rule_catches_a_sentence_planted_below_words(tmp_path, monkeypatch):
    """The checker on a real module tree: a refusal worded in a source (trace/) and one in the
    model are caught; codes, values, docstrings, assert messages and words/ itself are not."""
    pkg = tmp_path / "vmmtui"
    for name, body in {
        "__init__.py": "",
        "trace/__init__.py": "",
        "trace/refusals.py": (
            '"""Why a probe was refused: a docstring may say so in as many words as it likes."""\n'
            "CODE = 'ebpf-no-bpf-capability'\n"
            "def why(cap):\n"
            "    assert cap, 'the capability is named by the caller'\n"
            "    return f'the kernel refused {cap}: run it as root'\n"
        ),
        "model/__init__.py": "",
        "model/ledger.py": "def raise_it():\n    raise ValueError('this memory was never freed')\n",
        "words/__init__.py": "",
        "words/trace.py": "REFUSED = {'ebpf-no-bpf-capability': 'the kernel refused bpf(): run it as root'}\n",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(body)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    found = worded_below()
    assert {k: [t for _, t in v] for k, v in found.items()} == {
        "vmmtui.model.ledger": ["this memory was never freed"],
        "vmmtui.trace.refusals": ["the kernel refused {}: run it as root"],
    }
    bad = ratchet(found, {"vmmtui.trace.refusals": 1, "vmmtui.stream.gone": 2})
    assert len(bad) == 2 and bad[0].startswith("vmmtui.model.ledger builds 1 sentences, 0 allowed")
    assert bad[1] == "vmmtui.stream.gone builds no sentence now: drop it from STILL_WORDED"
    assert ratchet(found, {"vmmtui.trace.refusals": 1, "vmmtui.model.ledger": 3}) == []


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
