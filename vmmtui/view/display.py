"""How volatile values are shown. ``stable`` mode masks pids, addresses, inodes and timings so that
layout snapshots and recorded lectures do not change from run to run."""

from __future__ import annotations

import re

_VOLATILE = [
    (re.compile(r"(socket|pipe|anon_inode|eventfd):\[\d+\]"), r"\1:[…]"),
    (re.compile(r"(?:/[^\s/]+)*/vmmtui-\d+-[A-Za-z0-9_]+"), "$TMPDIR/vmmtui-…"),
    (re.compile(r"vmmtui-\d+-[A-Za-z0-9_]+"), "vmmtui-…"),
    (re.compile(r"\buid[ =]\d+"), "uid …"),
    (re.compile(r"0x[0-9a-fA-F]{5,}"), "0x…"),
    (re.compile(r"\bpid[ =]\d+"), "pid …"),
    (re.compile(r"/proc/\d+/"), "/proc/…/"),
    (re.compile(r"\b(producer|consumer) \d+\b"), r"\1 …"),
    (re.compile(r"\b\d+\.\d+ ms\b"), "… ms"),
    # the kernel's record: a run's keyed file identity and socket inodes
    (re.compile(r"\[file [0-9a-f]+\]"), "[file …]"),
    (re.compile(r"\b(inode|peer) \d+"), r"\1 …"),
]


class Display:
    def __init__(self, stable: bool = False):
        self.stable = stable

    def pid(self, pid: int | None) -> str:
        return "-" if pid is None else ("…" if self.stable else str(pid))

    def addr(self, value: int | None) -> str:
        return "-" if value is None else ("0x…" if self.stable else f"0x{value:x}")

    def ms(self, ns: int | None) -> str:
        if ns is None:
            return ""
        return "… ms" if self.stable else f"{ns / 1e6:.3f} ms"

    def text(self, s: str) -> str:
        if not self.stable:
            return s
        for pattern, repl in _VOLATILE:
            s = pattern.sub(repl, s)
        return s
