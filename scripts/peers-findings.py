"""What vmmtui said about real programs nobody here wrote, summarised by kind (scripts/peers-check.sh).

  peers-findings.py --json RUN.jsonl...      each ``vmmtui trace --json`` stream: its end line's
                                             counts, the problems by kind, how long each hold
                                             after its exporter ended lasted, when each growth
                                             was said (live or at the holder's exit), how the
                                             holders of the problems ended
  peers-findings.py --plugin OUT.txt...      each ``pytest --vmmtui`` run's output: passed and
                                             failed, the failures the plugin caused (its own
                                             summary's ``FAILED`` lines) by kind and start method
  --expect zero                              exit 1 unless every run has 0 to look at and 0
                                             failures caused by the plugin (a healthy peer)
  --expect named                             exit 1 unless every run names a problem while its
                                             holder still runs (a leak the world follows)

The weights are the code's own (``vmmtui.model.policy.weigh``), the
counts the end line's (``TraceFinished``), so the figures are what a user of this tree is told.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from vmmtui.model.ends import End
from vmmtui.model.findings import Weight
from vmmtui.model.policy import relation_of, weigh
from vmmtui.stream.events import Event
from vmmtui.stream.observed import LedgerFinding, ProcessExit, TraceFinished

#: what a hold after the exporter ended is, and its end in the past
AFTER_DEATH = ("held-after-exporter-died", "released-after-exporter-died")


@dataclass
class Run:
    """One traced run's figures."""

    path: str
    mode: str = ""
    returncode: int | None = None
    findings: int = 0
    problems: int = 0
    quiet: int = 0
    lost: int = 0
    #: the problems by kind, as findings (pins: one relation may be several), and as relations
    #: (the policy's (problem, holder, exporter): what the end line counts)
    kinds: Counter[str] = field(default_factory=Counter)
    relations: defaultdict[str, set] = field(default_factory=lambda: defaultdict(set))
    #: every finding by kind and weight
    weights: Counter[tuple[str, str]] = field(default_factory=Counter)
    #: milliseconds each hold after its exporter ended lasted (its end seen)
    holds_ms: list[float] = field(default_factory=list)
    #: (growth's holder, said while it ran, the pins at each round)
    growth: list[tuple[int, bool, list[int]]] = field(default_factory=list)
    #: how the holder of each problem ended: "exit 0", "SIGTERM"…, and how many holders
    ends: Counter[str] = field(default_factory=Counter)
    holders: int = 0
    #: problems said while their holder still ran
    live: int = 0
    #: each problem kind's findings by (how, file, the holder's end, the exporter then)
    detail: defaultdict[str, Counter[tuple[str, str, str, str]]] = field(
        default_factory=lambda: defaultdict(Counter)
    )


def end_words(code: int) -> str:
    end = End.of_status(code)
    if end.signal:
        try:
            return signal.Signals(end.signal).name
        except ValueError:
            return f"signal {end.signal}"
    return f"exit {end.code}"


def read_run(path: Path) -> Run:
    run = Run(str(path))
    events: list[Event] = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue  # the traced program's own output, where it shares the stream
        try:
            events.append(Event.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    exits = {e.pid: (i, e) for i, e in enumerate(events) if isinstance(e, ProcessExit)}
    holders: set[int] = set()
    for i, e in enumerate(events):
        if isinstance(e, TraceFinished):
            run.mode, run.returncode, run.lost = e.mode, e.returncode, e.lost
            run.findings, run.problems, run.quiet = e.findings, e.problems, e.quiet
        if not isinstance(e, LedgerFinding):
            continue
        w = weigh(e)
        run.weights[(e.kind, str(w))] += 1
        if e.kind == "released-after-exporter-died" and e.since:
            run.holds_ms.append((e.ktime - e.since) / 1e6)
        if w is not Weight.PROBLEM:
            continue
        run.kinds[e.kind] += 1
        run.relations[e.kind].add(relation_of(e))
        exit_at = exits.get(e.pid)
        alive = exit_at is None or i < exit_at[0]
        run.live += alive
        if e.kind == "growth":
            run.growth.append((e.pid, alive, list(e.opens)))
        holders.add(e.pid)
        end = end_words(exit_at[1].code) if exit_at else "alive at the end"
        run.ends[end] += 1
        peer_exit = exits.get(e.peer)
        exporter = (
            "no exporter"
            if not e.peer
            else "exporter ended"
            if peer_exit and peer_exit[1].ktime <= e.ktime
            else "exporter alive"
        )
        run.detail[e.kind][(e.how or "-", e.name or "-", end, exporter)] += 1
    run.holders = len(holders)
    return run


def said_runs(runs: list[Run], verbose: bool = False) -> list[str]:
    out = []
    for r in runs:
        kinds = (
            ", ".join(
                f"{k} {n}"
                + (f" in {len(r.relations[k])} relations" if len(r.relations[k]) != n else "")
                for k, n in r.kinds.most_common()
            )
            or "none"
        )
        now = len(set().union(*r.relations.values())) if r.relations else 0
        weighed = f" (this tree's policy: {now})" if now != r.problems else ""
        out.append(
            f"{Path(r.path).name}: {r.problems} to look at{weighed} ({kinds}); {r.quiet} quiet; "
            f"{r.findings} findings; {r.mode or 'no end line'}, exit {r.returncode}, "
            f"{r.lost} records lost"
        )
        if r.holds_ms:
            out.append(
                f"  holds after the exporter ended: {len(r.holds_ms)}, longest "
                f"{max(r.holds_ms):.1f} ms, median {sorted(r.holds_ms)[len(r.holds_ms) // 2]:.1f} ms"
            )
        for pid, alive, opens in r.growth:
            when = "live" if alive else "at its exit"
            out.append(f"  growth of pid {pid} said {when}: pins {' → '.join(map(str, opens))}")
        if verbose:
            for kind, by in r.detail.items():
                for (how, name, end, exporter), n in by.most_common():
                    out.append(f"    {kind}: {n} {how}, {name}, holder {end}, {exporter}")
        if r.ends:
            ends = ", ".join(f"{k} {n}" for k, n in r.ends.most_common())
            out.append(f"  the problems' holders ({r.holders} processes) ended by: {ends}")
    if len(runs) > 1:
        total = Counter[str]()
        for r in runs:
            total.update(r.kinds)
        holds = [h for r in runs for h in r.holds_ms]
        out.append(
            f"all {len(runs)} runs: to look at {','.join(str(r.problems) for r in runs)}; "
            + (", ".join(f"{k} {n}" for k, n in total.most_common()) or "no problem")
            + (f"; longest hold after an exporter ended {max(holds):.1f} ms" if holds else "")
        )
    return out


#: pytest's last line: ``18 failed, 126 passed, 236 deselected in 98.71s``
_TOTALS = re.compile(r"(\d+) (passed|failed|error|errors|skipped|deselected|xfailed|xpassed)\b")
#: the plugin's summary: ``FAILED file.py::Class::test: held-at-exit: words``
_BY_PLUGIN = re.compile(r"^FAILED (\S+?): ([a-z-]+): (.*)$")
#: a test whose trace failed (the plugin fails it too): ``FAILED t.py::x: the trace failed, …``
_NO_VERDICT = re.compile(r"^FAILED (\S+?): the trace failed")
_TRACED = re.compile(r"^(\d+) tests? traced by (.+?), (\d+) with problems")


@dataclass
class PluginRun:
    path: str
    totals: dict[str, int] = field(default_factory=dict)
    traced: str = ""
    #: the failures the plugin caused: (test, kind, what)
    caused: list[tuple[str, str, str]] = field(default_factory=list)


def read_plugin(path: Path) -> PluginRun:
    run = PluginRun(str(path))
    lines = path.read_text(errors="replace").splitlines()
    in_summary = False
    for line in lines:
        if re.match(r"^=+ vmmtui =+$", line):
            in_summary = True
            continue
        if in_summary and line.startswith("=") and "vmmtui" not in line:
            in_summary = False
        if m := _TRACED.match(line):
            run.traced = line
        if in_summary and (m := _NO_VERDICT.match(line)):
            run.caused.append((m[1], "no verdict", "the trace failed"))
        elif in_summary and (m := _BY_PLUGIN.match(line)):
            run.caused.append((m[1], m[2], m[3]))
    for line in reversed(lines):
        if " in " in line and _TOTALS.search(line):
            run.totals = {
                k.rstrip("s") if k == "errors" else k: int(n) for n, k in _TOTALS.findall(line)
            }
            break
    return run


def method_of(test: str) -> str:
    m = re.search(r"test_multiprocessing_(\w+?)\.py", test)
    return m[1] if m else Path(test.split("::")[0]).stem


def said_plugin(runs: list[PluginRun]) -> list[str]:
    out = []
    for r in runs:
        totals = ", ".join(f"{n} {k}" for k, n in r.totals.items()) or "no totals (did it run?)"
        out.append(f"{Path(r.path).name}: {totals}; {len(r.caused)} failures caused by the plugin")
        if r.traced:
            out.append(f"  {r.traced}")
        by: defaultdict[str, Counter[str]] = defaultdict(Counter)
        for test, kind, _ in r.caused:
            by[kind][method_of(test)] += 1
        for kind, methods in sorted(by.items()):
            ms = ", ".join(f"{m} {n}" for m, n in methods.most_common())
            out.append(f"  {kind}: {sum(methods.values())} ({ms})")
        for test, kind, what in r.caused[:3]:
            out.append(f"    e.g. {test}: {kind}: {what[:160]}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", nargs="+", default=[], type=Path, metavar="RUN")
    p.add_argument("--plugin", nargs="+", default=[], type=Path, metavar="OUT")
    p.add_argument("--expect", choices=("zero", "named"))
    p.add_argument(
        "--detail", action="store_true", help="each problem kind by how, file, holder's end"
    )
    a = p.parse_args(argv)
    missing = [str(f) for f in [*a.json, *a.plugin] if not f.is_file()]
    if missing or not (a.json or a.plugin):
        print(
            f"peers-findings: no such output: {', '.join(missing) or '(none given)'}",
            file=sys.stderr,
        )
        return 2
    runs = [read_run(f) for f in a.json]
    plugged = [read_plugin(f) for f in a.plugin]
    for line in said_runs(runs, a.detail) + said_plugin(plugged):
        print(line)
    if a.expect == "zero":
        bad = [r.path for r in runs if r.problems or r.returncode is None] + [
            r.path for r in plugged if r.caused or not r.totals
        ]
    elif a.expect == "named":
        bad = [r.path for r in runs if not r.live]
    else:
        bad = []
    if bad:
        want = "0 to look at" if a.expect == "zero" else "a problem named while its holder ran"
        print(f"expected {want}, not so in: {', '.join(Path(b).name for b in bad)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
