"""The help screen: the keys (made from the app's BINDINGS) and what each panel on screen shows:
the demo's workers, or a trace's processes (a live trace and the replay of one)."""

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


TRACE_INTRO = """\
# vmmtui trace

Programs vmmtui did not start, observed from the kernel (eBPF) or by polling `/proc`: every fd
that goes from one process to another (`SCM_RIGHTS`, `pidfd_getfd`), every memfd, dup and close,
and every CUDA sharing call. Each call is a frame: `←`/`→`, `home`, `g` and the timeline go back
through them; `end` returns to live.
"""

TRACE_PANELS = """\
**Process panels** (top row), one per process that matters, as many as fit side by side: first
those that exported, sent, received, took or imported something, then those with a finding, then
those that hold fds or GPU memory, then the command's own process. Each panel lists the process's
fds of interest (how each came: created, exported, sent, received, taken, dup, inherited; `←` the
process and fd it came from; the kernel's `struct file` or `kcmp` as proof), its memory
(allocations, pools, mappings, imports, and who pins each), then its last calls. The border says
whether it runs or how it ended, and how many calls it made. `tab` focuses a panel (wider), `o`
sorts its memory.

**+N more processes** (under the panels): every process without a panel (wrappers, launchers,
helpers, and sharers beyond the panels that fit), counted; `tab` to it or `m` lists them.

**wire**: every transfer between processes, newest last, with the fd numbers on both sides, the
socket it went over and the time it took; `in flight` while sent and not yet received.

**verdicts**: the ledger's findings: how many shares and imports were proven and how, then each
problem with its cause and its fix (a refused `pidfd_getfd`, an fd never closed, memory still held
after its exporter died); records the kernel could not hand over are counted here too.

**status line**: live or as of which call, and the count of findings. **event log**: every call
as the text output words it (`/` searches it). **timeline**: the calls; `✗` marks the calls with a
finding, `]`/`[` go to the next/previous one.

**Output** (`O`, a live `trace -- CMD`): the command's own stdout and stderr, captured while the
inspector has the terminal (stderr in red, the newest kept, what was dropped counted) and printed
when the inspector closes. A recording does not keep it.

Press `escape` or `?` to close.
"""


def key_table(bindings, palette_key: str) -> str:
    """The Markdown table of every key: one row per action, then the command palette's key."""
    rows = [f"| {c.key_text} | {c.help} |" for c in commands(bindings)]
    rows.append(f"| `{palette_key}` | command palette: every action by name |")
    return "| key | action |\n|---|---|\n" + "\n".join(rows) + "\n"


class HelpScreen(ModalScreen[None]):
    BINDINGS = [("escape", "dismiss", "Close"), ("question_mark", "dismiss", "Close")]

    def __init__(self, trace: bool = False) -> None:
        super().__init__()
        #: a trace's panels (a live trace or its replay), not the demo's workers
        self.trace = trace

    def compose(self) -> ComposeResult:
        intro, panels = (TRACE_INTRO, TRACE_PANELS) if self.trace else (INTRO, PANELS)
        text = "\n".join(
            [intro, key_table(self.app.BINDINGS, self.app.COMMAND_PALETTE_BINDING), panels]
        )
        with VerticalScroll(id="help"):
            yield Markdown(text)
