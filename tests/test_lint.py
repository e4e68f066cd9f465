import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff not installed (pip install -e '.[dev]')")
    res = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format_is_applied():
    """The house style is ``ruff format`` (100 columns): a file left unformatted fails here."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff not installed (pip install -e '.[dev]')")
    res = subprocess.run([ruff, "format", "--check", str(ROOT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_is_clean():
    """``mypy`` with the configuration in pyproject.toml (``--check-untyped-defs`` over vmmtui/)."""
    pytest.importorskip("mypy", reason="mypy not installed (pip install -e '.[dev]')")
    res = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
