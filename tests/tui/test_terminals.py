"""The full-screen commands on real pseudo-terminals: what they need of the terminal, and the one
exit-status rule (q: the command's own status, Ctrl-C 130, SIGHUP 129, SIGTERM 143)."""

from __future__ import annotations

import pytest
from terminal import Terminal


@pytest.mark.parametrize("term", ["dumb", None], ids=["TERM=dumb", "no-TERM"])
@pytest.mark.parametrize(
    "args, instead",
    [(["replay", "cpu-memfd-1mib"], "--html"), (["--backend", "memfd"], "vmmtui run")],
    ids=["replay", "inspector"],
)
def test_a_terminal_that_cannot_draw_a_screen_is_one_line_and_exit_2(tmp_path, term, args, instead):
    """TERM=dumb (or none) drew the first frame and then answered no key, q nor Ctrl-C, at 70 %
    CPU, and outlived its terminal."""
    t = Terminal(tmp_path, *args, term=term)
    try:
        took = t.ended_within(20)
        assert took is not None, t.text[-1500:]
        lines = [line for line in t.text.replace("\r", "").splitlines() if line.strip()]
        assert t.proc.returncode == 2, lines
        said = f"TERM={term}" if term else "TERM is not set"
        assert len(lines) == 1 and said in lines[0] and instead in lines[0], lines
        assert "\x1b[" not in t.output.decode(errors="replace")  # no screen was opened
    finally:
        t.close()
