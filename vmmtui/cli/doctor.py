"""``vmmtui doctor``: what this machine can run, and why not."""

from __future__ import annotations

import argparse

from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, device_arg
from vmmtui.system import host

#: what ``vmmtui doctor --help`` opens with: what it is for, and an example
ABOUT = """\
Say what this machine can run: the NVIDIA driver, each device's VMM and fd-handle support,
the memfd backend, kcmp and the pidfd road, each with the reason when it cannot.

example:
  vmmtui doctor
"""


def add_arguments(doc: argparse.ArgumentParser) -> None:
    """``vmmtui doctor``'s options, on the parser the command line made for it."""
    doc.add_argument("--device", type=device_arg, default=0, help="CUDA device ordinal (default 0)")
    doc.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from vmmtui.doctor.checks import diagnose

    rep = diagnose(args.device)
    table = Table(title="vmmtui doctor", show_header=False)
    table.add_column("check")
    table.add_column("finding")
    for f in rep.findings:
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: " "}[f.ok]
        table.add_row(f.name, f"{mark} {f.value}")
    console = Console()
    console.print(table)
    if not host.is_linux():
        console.print(f"Live runs need Linux; here vmmtui replays: {host.REPLAY_INSTEAD}")
        return EXIT_FAILED
    if not rep.runnable:
        console.print("[red]Nothing can run here: neither the cuda nor the memfd backend works.[/]")
        return EXIT_FAILED
    console.print(
        f"vmmtui run will use the [bold]{'cuda' if rep.cuda_ok else 'memfd'}[/] backend by default."
    )
    return EXIT_OK
