"""The backends' modules depend on errors.py, never on each other: no cycle between cuda and kernels."""

import ast
from pathlib import Path

import vmmtui.backends

ROOT = Path(vmmtui.backends.__file__).parent


def imports(module: str) -> set[str]:
    """Every vmmtui.backends module ``module`` imports, at the top or inside a function."""
    tree = ast.parse((ROOT / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("vmmtui.backends.")
        ):
            found.add(node.module.rsplit(".", 1)[1])
        elif isinstance(node, ast.Import):
            found |= {
                a.name.rsplit(".", 1)[1]
                for a in node.names
                if a.name.startswith("vmmtui.backends.")
            }
    return found


def test_no_import_cycle_between_the_backend_modules():
    graph = {p.stem: imports(p.stem) for p in ROOT.glob("*.py") if p.stem != "__init__"}
    assert (
        "cuda" not in graph["kernels"]
        and "kernels" not in graph["errors"]
        and "cuda" not in graph["errors"]
    )

    def reaches(start: str, goal: str, seen: frozenset = frozenset()) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n}))
            for n in graph.get(start, ())
        )

    assert not [m for m in graph if reaches(m, m)]


def test_dead_backend_attributes_are_gone():
    from vmmtui.backends.base import Backend

    for name in ("places", "fd_target_prefix"):
        assert not hasattr(Backend, name)
