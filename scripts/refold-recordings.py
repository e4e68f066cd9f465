#!/usr/bin/env python3
"""Rewrite trace recordings with their findings found again by today's ledger: each line of the
source (a call, an exit, a poll) is kept byte for byte, each line the ledger made (a finding, a
probe, pinned bytes) is made again, in the order the pipeline gives it. Run after a change to
the verdicts, so that a recording's words match what replaying it says (tests/model/
test_refold.py checks they do). ``python3 scripts/refold-recordings.py [FILE...]`` (default:
the gallery's trace recordings and tests/data/traces); prints what changed, per kind."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter, deque
from pathlib import Path

from vmmtui.model.probes import reclassified
from vmmtui.pipeline.session import MADE_BY_THE_LEDGER, refold
from vmmtui.record.recording import read
from vmmtui.stream.observed import LedgerFinding, TraceFinished
from vmmtui.words.findings import json_line

ROOT = Path(__file__).resolve().parents[1]


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().split("\n")


def _made(line: str) -> bool:
    try:
        return json.loads(line).get("event") in {c.__name__ for c in MADE_BY_THE_LEDGER}
    except ValueError:
        return False


def _said(line: str) -> tuple[str, str, int, int]:
    d = json.loads(line)
    return (d.get("event", ""), d.get("kind", ""), d.get("pid", 0), d.get("peer", 0))


def refold_file(path: Path) -> str:
    lines = [x for x in _lines(path) if x.strip()]
    header = lines[0] if "vmmtui-recording" in lines[0] else None
    body = lines[1:] if header else lines
    source = [x for x in body if not _made(x)]
    recorded = list(reclassified(read(path).events))  # as a replay reads it
    again = refold(recorded)
    # a finding found again as it was recorded keeps its line (the words of the vmmtui that
    # wrote it): only what the ledger now finds anew, or no longer, changes
    was = deque((line, _said(line)) for line in body if _made(line))
    out = [header] if header else []
    kept = iter(source)
    for e in again:
        if isinstance(e, MADE_BY_THE_LEDGER):
            now = (
                type(e).__name__,
                getattr(e, "kind", ""),
                getattr(e, "pid", 0),
                getattr(e, "peer", 0),
            )
            while was and was[0][1] != now and now in {k for _, k in was}:
                was.popleft()  # a line the ledger no longer makes
            out.append(was.popleft()[0] if was and was[0][1] == now else json_line(e))
        elif isinstance(e, TraceFinished):  # its counts are the findings': made again too
            next(kept)
            out.append(json_line(e))
        else:
            out.append(next(kept))
    out += list(kept)  # lines the pipeline did not pass on (none expected)
    said = [(f.kind, f.pid, f.peer) for f in recorded if isinstance(f, LedgerFinding)]
    if said == [(f.kind, f.pid, f.peer) for f in again if isinstance(f, LedgerFinding)]:
        return "no change (left as it was)"
    text = "\n".join(out) + "\n"
    if path.suffix == ".gz":
        with gzip.GzipFile(path, "wb", mtime=0) as f:
            f.write(text.encode())
    else:
        path.write_text(text)
    was = Counter(f.kind for f in recorded if isinstance(f, LedgerFinding))
    now = Counter(f.kind for f in again if isinstance(f, LedgerFinding))
    changed = {k: (was[k], now[k]) for k in sorted(set(was) | set(now)) if was[k] != now[k]}
    return ", ".join(f"{k} {a} → {b}" for k, (a, b) in changed.items()) or "the order changed"


def main(argv: list[str]) -> int:
    paths = [Path(p) for p in argv] or sorted(
        [
            *(ROOT / "vmmtui/record/gallery").glob("*trace*.jsonl.gz"),
            *(ROOT / "tests/data/traces").glob("*.jsonl.gz"),
        ]
    )
    for p in paths:
        print(f"{p.name}: {refold_file(p)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
