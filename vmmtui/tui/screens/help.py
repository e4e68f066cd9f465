"""The help screen: the keys (made from the app's BINDINGS) and what each panel shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from vmmtui.tui.commands import commands

INTRO = """\
# vmmtui

Two real processes share memory: the **producer** allocates it, exports it as a file descriptor and
sends the fd over a Unix socket (`SCM_RIGHTS`); the **consumer** imports the fd, maps the same
physical memory and verifies the pattern. Other roads: `--transport pidfd` (the producer sends only
its pid and the fd's number; the consumer takes the fd with `pidfd_open` + `pidfd_getfd`, as
PyTorch's expandable segments do), `--mechanism legacy` (a 64-byte IPC handle, no fd) and
`--mechanism pool` (a memory pool's fd and 64 bytes of export data per allocation).
"""

PANELS = """\
**fd tables** are read from `/proc/PID/fd` after every step and 4 times a second between steps (a read
that overlaps a step is dropped: each step keeps the table read after it). The worker's own fds come
first, the exported and received fd at the top. ✓: the fd the worker says it holds is
what the kernel shows (number, target, device and inode); ✗: missing or different. New fds are
green at the step they appeared; those closed since the table before are struck through. `≡` marks the exported/received pair that
`kcmp(KCMP_FILE)` proved to be the same open file description.

The **memfd** backend shares CPU memory, not GPU memory: it is the CPU analogue of the CUDA path
(and of XPMEM's make/get/attach), for machines without a GPU.

**Looking back**: click a done step (✓) in a step list, or any line of the event log, to see the
panels as they were just after that step, marked "as of step N"; the session stays where it is and
`end` returns to it.

Press `escape` or `?` to close.
"""


def key_table(bindings, palette_key: str) -> str:
    """The Markdown table of every key: one row per action, then the command palette's key."""
    rows = [f"| {c.key_text} | {c.help} |" for c in commands(bindings)]
    rows.append(f"| `{palette_key}` | command palette: every action by name |")
    return "| key | action |\n|---|---|\n" + "\n".join(rows) + "\n"


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "Close"), ("question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        text = "\n".join(
            [INTRO, key_table(self.app.BINDINGS, self.app.COMMAND_PALETTE_BINDING), PANELS]
        )
        with VerticalScroll(id="help"):
            yield Markdown(text)
