"""The help screen: the keys and what each panel shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# vmmtui

Two real processes share memory: the **producer** allocates it, exports it as a file descriptor and
sends the fd over a Unix socket (`SCM_RIGHTS`); the **consumer** imports the fd, maps the same
physical memory and verifies the pattern.

| key | action |
|---|---|
| `space` / `n` | next step |
| `r` | run to the end |
| `a` | autoplay on/off; `+` / `-` pace |
| `ctrl+r` | restart (workers stopped, everything cleaned, fresh session) |
| `s` | save an SVG screenshot |
| `f` | fold/unfold the fds that are not ours (`/dev/nvidia*`, stdio, pipes) |
| `c` | pick a scenario: a normal run, or one failure made real (restarts the session) |
| `ctrl+p` | command palette |
| `q` | quit (cleans up first) |

**fd tables** are read from `/proc/PID/fd` 4 times a second. ✓: the fd the worker says it holds is
what the kernel shows (number, target, device and inode); ✗: missing or different. New fds are
green for a moment; closed ones are struck through. `≡` marks the exported/received pair that
`kcmp(KCMP_FILE)` proved to be the same open file description.

The **memfd** backend shares CPU memory, not GPU memory: it is the CPU analogue of the CUDA path
(and of XPMEM's make/get/attach), for machines without a GPU.

Press `escape` or `?` to close.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "Close"), ("question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)
