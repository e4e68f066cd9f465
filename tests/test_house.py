"""The architecture holds: layers ignorant of the ones above, no import cycle, small modules."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "vmmtui"
CORE = [
    "vmmtui.plan.config",
    "vmmtui.session",
    "vmmtui.worker",
    "vmmtui.worker.core",
    "vmmtui.backends",
    "vmmtui.backends.memfd",
    "vmmtui.backends.cuda",
    "vmmtui.stream.events",
    "vmmtui.scenarios",
    "vmmtui.stream.state",
    "vmmtui.words.narration",
    "vmmtui.render.console",
    "vmmtui.render.transcript",
    "vmmtui.bench.run",
    "vmmtui.cli",
    "vmmtui.trace.procfs",
    "vmmtui.trace.procfs.follow",
    "vmmtui.trace.procfs.watch",
    "vmmtui.record",
    "vmmtui.record.timeline",
    "vmmtui.view",
    "vmmtui.view.model",
    "vmmtui.view.frames",
    "vmmtui.view.search",
    "vmmtui.record.notes",
    "vmmtui.render.page",
]
#: package prefix -> packages it must never import (the layers above it)
LAYERS = {
    "vmmtui.backends": (
        "vmmtui.worker",
        "vmmtui.session",
        "vmmtui.scenarios",
        "vmmtui.tui",
        "vmmtui.stream.events",
        "vmmtui.words.narration",
        "vmmtui.render.console",
        "vmmtui.render.transcript",
        "vmmtui.cli",
    ),
    "vmmtui.worker": (
        "vmmtui.session",
        "vmmtui.scenarios",
        "vmmtui.tui",
        "vmmtui.stream.events",
        "vmmtui.words.narration",
        "vmmtui.render.console",
        "vmmtui.render.transcript",
        "vmmtui.cli",
    ),
    "vmmtui.session": (
        "vmmtui.worker",
        "vmmtui.tui",
        "vmmtui.words.narration",
        "vmmtui.render.console",
        "vmmtui.render.transcript",
        "vmmtui.cli",
    ),
    "vmmtui.scenarios": (
        "vmmtui.session",
        "vmmtui.worker",
        "vmmtui.tui",
        "vmmtui.words.narration",
        "vmmtui.cli",
    ),
    "vmmtui.tui": (
        "vmmtui.backends.cuda",
        "vmmtui.backends.memfd",
        "vmmtui.backends.kernels",
        "vmmtui.worker",
    ),
    "vmmtui.words.narration": (
        "vmmtui.tui",
        "vmmtui.session",
        "vmmtui.worker",
        "vmmtui.backends.cuda",
    ),
    "vmmtui.trace.procfs": (
        "vmmtui.session",
        "vmmtui.worker",
        "vmmtui.tui",
        "vmmtui.render.console",
        "vmmtui.render.transcript",
        "vmmtui.cli",
    ),
    "vmmtui.view": (
        "vmmtui.session",
        "vmmtui.worker",
        "vmmtui.tui",
        "vmmtui.backends.cuda",
        "vmmtui.backends.memfd",
        "vmmtui.cli",
    ),
    "vmmtui.record": (
        "vmmtui.session",
        "vmmtui.worker",
        "vmmtui.tui",
        "vmmtui.backends.cuda",
        "vmmtui.cli",
    ),
}


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
    if name == "vmmtui":  # the root's lazy re-exports (PEP 562 ``__getattr__``: ``vmmtui.tracing``)
        # run when a user asks for them, long after the package is loaded: no layer's edge
        skip |= {
            id(n)
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
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


def test_layers_do_not_import_the_layers_above():
    bad = []
    for name, deps in graph().items():
        for prefix, banned in LAYERS.items():
            if name == prefix or name.startswith(prefix + "."):
                bad += [
                    f"{name} imports {d}"
                    for d in deps
                    if any(d == b or d.startswith(b + ".") for b in banned)
                ]
    assert not bad, bad


def test_the_core_never_imports_textual():
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in CORE)
        + "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))"
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


# -- the observer, the model of programs, the screen ---------------------------------------------
#: the event classes the observer emits: data every layer may read
OBSERVED = ("vmmtui.stream.events", "vmmtui.stream.observed", "vmmtui.stream")
#: the modules of trace/ that are not the observer: the pipeline of a run, where the observer's
#: events meet the model's fold (``trace.session``), and the words of observed programs
NOT_THE_OBSERVER = ("vmmtui.trace.session", "vmmtui.trace.narration", "vmmtui.trace.words")


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _all_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, ours and others' (lazy ones too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return out


def test_the_model_imports_no_observer_no_words_and_no_screen():
    """vmmtui/model is data and pure functions: it reads the observed events, never the observer
    that made them (eBPF, polling), never a wording, a renderer or Textual."""
    banned = (
        "vmmtui.trace",
        "vmmtui.words.narration",
        "vmmtui.tui",
        "vmmtui.cli",
        "vmmtui.view",
        "vmmtui.render.console",
        "textual",
        "rich",
    )
    bad = [
        f"{path.relative_to(ROOT)} imports {m}"
        for path in (PACKAGE / "model").rglob("*.py")
        for m in sorted(_all_imports(path))
        if _under(m, banned) and not _under(m, OBSERVED)
    ]
    assert (PACKAGE / "model" / "__init__.py").exists() and not bad, bad


def test_the_observer_never_imports_the_model_the_screen_or_the_command_line():
    banned = ("vmmtui.model", "vmmtui.view", "vmmtui.tui", "vmmtui.cli")
    bad = [
        f"{name} imports {d}"
        for name, deps in graph().items()
        if _under(name, ("vmmtui.trace",)) and not _under(name, NOT_THE_OBSERVER)
        for d in sorted(deps)
        if _under(d, banned)
    ]
    assert not bad, bad


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


def test_the_programs_fold_says_no_words():
    """The screen's fold of observed programs keeps what happened (the call's event, the socket
    it went over); the panels word it where they draw it."""
    words = ("vmmtui.trace.narration", "vmmtui.trace.words", "vmmtui.words.narration")
    deps = graph()["vmmtui.view.programs"]
    assert not [d for d in deps if _under(d, words)], deps


def test_the_folds_word_no_finding_and_no_log_entry():
    """The model and the screen's folds keep findings and log entries as data (the event, its
    facts); the words of both are made where they are drawn (``words.findings``, ``words.log``)."""
    words = (
        "vmmtui.words.findings",
        "vmmtui.words.log",
        "vmmtui.trace.narration",
        "vmmtui.trace.words",
    )
    bad = [
        f"{name} imports {d}"
        for name, deps in graph().items()
        if _under(name, ("vmmtui.view", "vmmtui.model"))
        for d in sorted(deps)
        if _under(d, words)
    ]
    assert not bad, bad
