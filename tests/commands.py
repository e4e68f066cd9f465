"""vmmtui's commands run as a user runs them, for the tests of what they print and how they end."""

from __future__ import annotations

import os
import subprocess
import sys


def vmmtui(*args: str, tmp=None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m vmmtui ARGS``, its output kept as text; ``tmp``: its TMPDIR, where a session
    makes its socket directory (so that a test sees what is left there)."""
    env = dict(os.environ)
    if tmp:
        env["TMPDIR"] = str(tmp)
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
