#!/usr/bin/env python3
"""Would ``pip install .`` of vmmtui find wheels on macOS and Windows? Resolved from here, for them.

For each platform tag, the dependencies in pyproject.toml whose environment markers hold there
(cuda-python only on Linux and Windows, where it has wheels) are resolved by pip as that platform
would: binary wheels only (``--only-binary=:all: --platform TAG --python-version 3.11``), in a
dry run that fetches metadata, not the wheels. Exit 0 when every platform resolves, else 1 with
pip's reason. Needs the network (PyPI) and ``packaging``.

    python scripts/resolve-wheels.py macosx_11_0_arm64 win_amd64
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "3.11"
#: the marker variables of each platform tag that the markers in pyproject.toml may ask about
PLATFORMS: dict[str, dict[str, str]] = {
    "macosx_11_0_arm64": {
        "sys_platform": "darwin",
        "platform_system": "Darwin",
        "os_name": "posix",
        "platform_machine": "arm64",
    },
    "win_amd64": {
        "sys_platform": "win32",
        "platform_system": "Windows",
        "os_name": "nt",
        "platform_machine": "AMD64",
    },
    "manylinux2014_x86_64": {
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "platform_machine": "x86_64",
    },
}


def environment(tag: str) -> dict[str, str]:
    env = dict(default_environment())
    env.update(PLATFORMS[tag], python_version=PYTHON, python_full_version=f"{PYTHON}.0")
    env["implementation_name"] = env["platform_python_implementation"] = "cpython"
    return env


def requirements(tag: str, pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """The dependencies that platform ``tag`` installs, markers evaluated there and dropped."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    env = environment(tag)
    chosen = []
    for dep in deps:
        req = Requirement(dep)
        if req.marker is None or req.marker.evaluate(env):
            req.marker = None
            chosen.append(str(req))
    return chosen


def resolve(tag: str) -> str | None:
    """None when pip finds a wheel of every dependency for ``tag``, else pip's last lines."""
    with tempfile.TemporaryDirectory() as target:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
             "--only-binary=:all:", "--platform", tag, "--python-version", PYTHON,
             "--target", target, *requirements(tag)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    if res.returncode == 0:
        return None
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("ERROR")]
    return "\n".join(lines[-3:] or res.stderr.splitlines()[-3:])


def main(tags: list[str]) -> int:
    from concurrent.futures import ThreadPoolExecutor

    tags = tags or ["macosx_11_0_arm64", "win_amd64"]
    if unknown := [t for t in tags if t not in PLATFORMS]:
        print(f"resolve-wheels: unknown platform {unknown[0]}: one of {', '.join(PLATFORMS)}")
        return 2
    with ThreadPoolExecutor(len(tags)) as pool:  # pip waits on the network: side by side
        answers = list(pool.map(resolve, tags))
    for tag, why in zip(tags, answers, strict=True):
        said = "resolves: " + ", ".join(requirements(tag)) if why is None else f"FAILS\n{why}"
        print(f"{tag}: {said}")
    return 1 if any(why is not None for why in answers) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
