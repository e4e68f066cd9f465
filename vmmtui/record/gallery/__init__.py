"""The gallery: real recordings shipped inside vmmtui (``*.jsonl.gz`` beside this file).

``vmmtui replay --list`` shows them; ``vmmtui replay NAME`` opens one by its name or a prefix that
names only it (``h100-vmm-1m``; ``h100-vmm`` names two, which it lists). Made on the GPU machines by
``scripts/make-gallery.sh``. No Textual here.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

from vmmtui.record.recording import MAGIC, Header, RecordingError, read, untrusted
from vmmtui.stream.names import shown

HERE = Path(__file__).resolve().parent
SUFFIXES = (".jsonl.gz", ".jsonl")


@dataclass
class Entry:
    name: str
    path: Path
    header: Header

    @property
    def size(self) -> int:
        return int(self.header.options.get("size", 0) or 0)


def _stem(path: Path) -> str:
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return path.stem


def _header_of(path: Path) -> Header:
    """The first line only: listing the gallery does not read every event."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        first = untrusted(json.loads(f.readline()))
    from vmmtui.stream.codec import decode

    return decode(Header, {k: v for k, v in first.items() if k != MAGIC})


def entries(folder: Path = HERE) -> list[Entry]:
    found = []
    for path in sorted(folder.iterdir()):
        if path.name.endswith(SUFFIXES):
            try:
                found.append(Entry(_stem(path), path, _header_of(path)))
            except (OSError, ValueError, KeyError):
                continue  # a broken gallery file is skipped in the listing; opening it says why
    return found


def listing(folder: Path = HERE) -> str:
    """The gallery grouped by where it was recorded: a line naming the device, machine, driver and
    date (read from each recording's header), then each recording's name, time and what it shows:
    the runs that verified first, then the failure scenarios."""
    rows = entries(folder)
    if not rows:
        return "the gallery is empty"
    width = max(len(e.name) for e in rows)
    groups: dict[str, list[Entry]] = {}
    for e in rows:
        h = e.header
        driver = h.driver or {
            "memfd": "no GPU driver (memfd)",
            "trace": "a program traced (eBPF)",
        }.get(h.backend, "driver unknown")
        day = h.when.split(" ")[0]
        groups.setdefault(shown(f"{h.where} · {driver} · {day}"), []).append(e)
    lines = []
    for where, group in groups.items():
        lines.append(where)
        for e in sorted(group, key=lambda e: (bool(e.header.options.get("scenario")), e.name)):
            time = e.header.when.split(" ")[-1]
            lines.append(
                f"  {e.name:<{width}}  {time}  {shown(e.header.label or e.header.backend)}"
            )
    total = sum(e.path.stat().st_size for e in rows)
    lines.append(
        f"{len(rows)} recordings, {total / 1024:.0f} KiB; open one with `vmmtui replay NAME` "
        "(a prefix that names one will do: h100-vmm-1m)"
    )
    return "\n".join(lines)


def find(name: str, folder: Path = HERE) -> Path | None:
    """The gallery file called ``name``, or the one whose name starts with it; RecordingError
    listing them when the prefix names several (which one was meant is the user's to say)."""
    rows = entries(folder)
    for e in rows:
        if e.name == name:
            return e.path
    matches = [e for e in rows if e.name.startswith(name)]
    if len(matches) > 1:
        raise RecordingError(
            f"{name} names {len(matches)} gallery recordings: "
            f"{', '.join(e.name for e in matches)}; give one of them"
        )
    return matches[0].path if matches else None


def resolve(arg: str, folder: Path = HERE):
    """A path on disk, else a gallery name: the Recording, or RecordingError saying what exists."""
    path = Path(arg)
    if path.exists() or "/" in arg or arg.endswith(SUFFIXES):
        return read(path)
    found = find(arg, folder)
    if found is None:
        names = ", ".join(e.name for e in entries(folder)) or "none"
        raise RecordingError(
            f"{arg}: no such file, and no gallery recording of that name (gallery: {names})"
        )
    return read(found)
