"""``vmmtui bench``: every path measured; results as tables, JSON and an SVG plot."""

from __future__ import annotations

import argparse
import sys

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
from vmmtui.sizes import parse_size

#: what ``vmmtui bench --help`` opens with: what it is for, and an example
ABOUT = """\
Measure every way of sharing (VMM, legacy IPC, a host-staged copy, memfd) against the device's
own copy bandwidth, and write the results as JSON and an SVG plot.

example:
  vmmtui bench --backend memfd --sizes 2MiB,64MiB --repeat 3
"""


def add_parser(sub) -> None:
    bn = sub.add_parser(
        "bench",
        help="measure every path (VMM, legacy IPC, host-staged copy, memfd) against the "
        "device's copy bandwidth; writes JSON and an SVG plot",
    )
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
        default="bench/results",
        help="directory for the JSON and SVG (default bench/results)",
    )
    bn.add_argument("--name", help="file name stem (default bench-HOST-DATE)")
    bn.add_argument("--json", action="store_true", help="print the result JSON instead of tables")
    bn.set_defaults(func=cmd_bench)


def _bullet(console, text) -> None:
    """``- text`` wrapped with a hanging indent, so that a long reason stays readable at 80 columns."""
    from rich.text import Text

    for i, line in enumerate(text.wrap(console, max(20, console.width - 2))):
        line.rstrip()
        console.print(Text("- " if i == 0 else "  ") + line, soft_wrap=True)


def cmd_bench(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

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
    from vmmtui.cli.inspector import screenshots_problem  # a directory, made if missing

    if problem := screenshots_problem(args.out):  # before minutes of measuring, not after
        print(f"vmmtui: {problem.replace('--screenshots', '--out', 1)}", file=sys.stderr)
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
    js, plot = write(result, Path(args.out), args.name)
    measured = measured_anything(result)
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
    console.print(f"wrote {js} and {plot}", highlight=False, markup=False)
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
