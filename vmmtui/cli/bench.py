"""``vmmtui bench``: every path measured; results as tables, JSON and an SVG plot."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from vmmtui.backends.labels import NAMES
from vmmtui.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    count_arg,
    device_arg,
    size_arg,
    sizes_arg,
)
from vmmtui.stream.sizes import parse_size

#: what ``vmmtui bench --help`` opens with: what it is for, and an example
ABOUT = """\
Measure every way of sharing (VMM, legacy IPC, a host-staged copy, memfd) against the device's
own copy bandwidth, and write the results as JSON and an SVG plot.

example:
  vmmtui bench --backend memfd --sizes 2MiB,64MiB --repeat 3
"""


def add_arguments(bn: argparse.ArgumentParser) -> None:
    """``vmmtui bench``'s options, on the parser the command line made for it."""
    bn.add_argument(
        "--backend",
        choices=NAMES,
        default="auto",
        help="cuda for all paths, memfd for the CPU path only",
    )
    bn.add_argument("--device", type=device_arg, default=0, help="CUDA device ordinal (default 0)")
    bn.add_argument(
        "--sizes",
        type=sizes_arg,
        metavar="2MiB,1GiB,...",
        help="sizes to sweep (default 2MiB,8MiB,32MiB,64MiB,256MiB,1GiB,4GiB,16GiB, capped by free memory)",
    )
    bn.add_argument(
        "--repeat", type=count_arg(10_000), default=5, help="sessions per path and size (default 5)"
    )
    bn.add_argument(
        "--memfd-max",
        type=size_arg,
        default=parse_size("2GiB"),
        help="largest memfd size (default 2GiB)",
    )
    bn.add_argument(
        "--staged-max",
        type=size_arg,
        default=parse_size("4GiB"),
        help="largest host-staged copy (default 4GiB)",
    )
    bn.add_argument(
        "--out",
        help="directory for the JSON and SVG (default: vmmtui's data directory, "
        "$XDG_DATA_HOME/vmmtui/bench or ~/.local/share/vmmtui/bench)",
    )
    bn.add_argument(
        "--name",
        help="file name stem, which must be new (default bench-HOST-DATE; -2, -3 ... when taken)",
    )
    bn.add_argument("--json", action="store_true", help="print the result JSON instead of tables")
    bn.set_defaults(func=cmd_bench)


def _bullet(console, text) -> None:
    """``- text`` wrapped with a hanging indent, so that a long reason stays readable at 80 columns."""
    from rich.text import Text

    for i, line in enumerate(text.wrap(console, max(20, console.width - 2))):
        line.rstrip()
        console.print(Text("- " if i == 0 else "  ") + line, soft_wrap=True)


def data_dir() -> Path:
    """Where results go unless --out says: the user's data directory (XDG), never the directory
    the command runs in (a clone's bench/results holds the project's committed results)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
    return Path(base) / "vmmtui" / "bench"


def out_problem(out: Path, name: str | None) -> str | None:
    """Why the results could not be written to ``out`` (one line, the fix); None when they can.
    Nothing is made here: the directory is made only when there are results to write."""
    fix = "name a writable directory (it is made if missing)"
    if out.exists() and not out.is_dir():
        return f"--out {out}: is not a directory; {fix}"
    existing = next((p for p in [out, *out.parents] if p.exists()), Path("/"))
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"--out {out}: {existing} is not writable; {fix}"
    from vmmtui.bench.run import taken

    if name and (there := taken(out, name)):
        return f"--name {name}: {there} exists; give another --name (results are never overwritten)"
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    import json

    from rich.console import Console
    from rich.text import Text

    from vmmtui.bench.report import (
        TARGETS_HEADING,
        gaps,
        init_line,
        measured_anything,
        tables,
        target_lines,
    )
    from vmmtui.bench.run import DEFAULT_SIZES, Bench, BenchConfig, write

    out = Path(args.out) if args.out else data_dir()
    if problem := out_problem(out, args.name):  # before minutes of measuring, not after
        print(f"vmmtui: {problem}", file=sys.stderr)
        return EXIT_USAGE
    from vmmtui.backends import choose

    choice = choose(args.backend, args.device)
    if not choice.usable:
        print(f"vmmtui: {choice.reason}", file=sys.stderr)
        return EXIT_USAGE
    console = Console(stderr=args.json)
    config = BenchConfig(
        args.backend,
        args.sizes or list(DEFAULT_SIZES),
        args.repeat,
        args.device,
        args.memfd_max,
        args.staged_max,
    )
    result = Bench(config, choice, progress=lambda line: console.print(line, highlight=False)).run()
    measured = measured_anything(result)
    written = None
    if measured:  # nothing is written when nothing was measured
        try:
            written = write(result, out, args.name)
        except OSError as exc:  # the disk filled, the name was taken meanwhile
            print(f"vmmtui: --out {out}: cannot write the results: {exc}", file=sys.stderr)
            return EXIT_FAILED
    if args.json:
        print(json.dumps(result.to_json()))
    elif measured:
        say = [part for heading, t in tables(result) for part in (heading, t)]
        say += [
            init_line(result),
            *(["empty cells:", *gaps(result)] if gaps(result) else []),
            "",
            TARGETS_HEADING,
        ]
        for line in say:
            if isinstance(line, str) and line.startswith("- "):
                _bullet(console, Text(line[2:]))
            elif isinstance(line, str):
                console.print(line, highlight=False, markup=False)
            else:
                console.print(line)
        for line in target_lines(result):
            _bullet(console, Text.from_markup(line[2:]))
    if written is not None:
        for path in written:  # one a line, whole: never broken across lines, a user copies them
            console.print(f"wrote {path}", highlight=False, markup=False, soft_wrap=True)
    if not measured:
        reasons = sorted({why for sizes in result.skipped.values() for why in sizes.values()})
        print(
            f"vmmtui: nothing could be measured: {'; '.join(reasons) or 'every path was skipped'}",
            file=sys.stderr,
        )
        return EXIT_FAILED
    bad = [p for p, sizes in result.paths.items() for e in sizes.values() if not e.all_verified]
    if bad:
        console.print(f"[red]some runs did not verify: {', '.join(sorted(set(bad)))}[/]")
    return EXIT_FAILED if bad else EXIT_OK
