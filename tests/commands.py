"""vmmtui's commands run as a user runs them, and its screens read as a user reads them: the one
way every test starts the CLI (``vmmtui``) and the one way it reads a Textual app's screen
(``screen_text``)."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: the checkout the tests run from: put first on a command's PYTHONPATH, so that the process
#: runs this tree's vmmtui whatever its working directory (a fixture folder, a tmp_path)
ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def vmmtui(
    *args: str,
    tmp: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | None = subprocess.DEVNULL,
    timeout: float = 120,
    errors: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m vmmtui ARGS``, its output kept as text, no terminal on stdin (a user's pipe or
    script; pass ``stdin=None`` to share the test's). ``tmp``: its TMPDIR, where a session makes
    its socket directory (so that a test sees what is left there); ``env``: variables over the
    test's own (a ``PYTHONPATH`` there comes before the checkout's); ``errors``: how undecodable
    output is read (``surrogateescape`` for a test that looks at raw bytes); the timeout is the
    failure of a command that never ends."""
    extra = dict(env or {})
    full = dict(os.environ)
    if tmp:
        full["TMPDIR"] = str(tmp)
    path = [extra.pop("PYTHONPATH", ""), str(ROOT), full.get("PYTHONPATH", "")]
    full.update(extra)
    full["PYTHONPATH"] = os.pathsep.join(p for p in path if p)
    return subprocess.run(
        [sys.executable, "-m", "vmmtui", *args],
        capture_output=True,
        text=True,
        errors=errors,
        env=full,
        cwd=cwd,
        stdin=stdin,
        timeout=timeout,
    )


def screen_text(app) -> str:
    """The words on a Textual app's screen, one string: its SVG screenshot's text spans joined,
    entities read, non-breaking spaces as spaces (what a user reads, without the styles)."""
    spans = re.findall(r"<text[^>]*>(.*?)</text>", app.export_screenshot(), flags=re.S)
    return html.unescape("".join(spans)).replace("\xa0", " ")
