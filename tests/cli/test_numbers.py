"""One check of every number on the command line: finite, in range, one line and exit 2 at once
(``run --timeout nan`` was an internal worker error, ``--timeout inf`` and ``--pace nan`` were
taken); and a memfd size the machine cannot hold well is refused, or said to be slow, up front."""

from __future__ import annotations

import argparse

import pytest

from vmmtui.backends import ram_available
from vmmtui.cli import main, parser
from vmmtui.plan.config import SessionConfig, validate
from vmmtui.stream.sizes import format_size

BAD = ["nan", "inf", "-inf", "1e999", "-1", "0", "x"]
#: every numeric option of every command, with its command line up to it
OPTIONS = [
    ["run", "--timeout"],
    ["--timeout"],
    ["--pace"],
    ["replay", "h100-vmm-1mib", "--pace"],
    ["replay", "h100-vmm-1mib", "--step"],
    ["run", "--device"],
    ["doctor", "--device"],
    ["bench", "--device"],
    ["bench", "--repeat"],
    ["soak", "--count"],
    ["watch", "--interval"],
    ["trace", "--interval"],
    ["trace", "--duration"],
    ["trace", "--never-imported-after"],
    ["attach", "--duration"],
]
#: 0 is a fine --step and --device
ZERO_IS_FINE = {"--step", "--device"}


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("option", OPTIONS, ids=" ".join)
def test_every_number_is_checked_in_one_line(option, value, capsys):
    if value == "0" and option[-1] in ZERO_IS_FINE:
        pytest.skip("0 is in range")
    with pytest.raises(SystemExit) as ex:
        parser().parse_args([*option[:-1], f"{option[-1]}={value}"])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and option[-1] in err[0] and "give " in err[0], err


def test_no_option_takes_a_bare_float_and_every_checked_one_is_tested_here():
    """float() takes nan and inf: every non-integer option goes through the one check (and a new
    one is added to OPTIONS above). Whole numbers that name a thing (a pid, --consumers) are
    checked where the thing is known, with their own line."""
    top = parser(every_command=True)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    actions = [a for p in [top, *sub.choices.values()] for a in p._actions if a.option_strings]
    assert [a.option_strings for a in actions if a.type is float] == []
    checked = {a.option_strings[-1] for a in actions if getattr(a.type, "__name__", "") == "number"}
    assert checked <= {o[-1] for o in OPTIONS}, checked - {o[-1] for o in OPTIONS}


def test_timeout_nan_is_refused_before_any_worker(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--backend", "memfd", "--timeout", "nan"])
    err = capsys.readouterr().err
    assert "not a finite number" in err and "report it" not in err


def test_a_memfd_size_over_half_the_available_ram_is_refused():
    available = 8 << 30
    config = SessionConfig(backend="memfd", size=5 << 30)
    said = validate(config, "memfd", capacity=available)
    assert said is not None and "more than half the RAM available now" in said
    assert format_size(4 << 30) in said  # the most it takes
    assert (
        validate(SessionConfig(backend="memfd", size=3 << 30), "memfd", capacity=available) is None
    )


def test_a_huge_memfd_size_on_this_machine_is_one_line(capsys):
    available = ram_available()
    if available is None:
        pytest.skip("no /proc/meminfo")
    size = f"{(available * 3 // 4) >> 20}MiB"
    assert main(["run", "--backend", "memfd", "--size", size]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MemAvailable" in err[0], err


def test_a_large_memfd_size_is_said_to_take_a_while_before_it_starts(capsys):
    from vmmtui.cli.options import choice_or_refuse

    choice = choice_or_refuse(parser().parse_args(["run", "--backend", "memfd", "--size", "1GiB"]))
    if choice is None:
        pytest.skip("this machine has less than 2 GiB of RAM available")
    err = capsys.readouterr().err
    assert "note: --size 1 GiB on memfd" in err and "seconds per GiB" in err


@pytest.mark.parametrize("size", ["1.5", "0.1KiB"])
def test_a_size_that_is_not_a_whole_number_of_bytes_is_refused(size, capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["run", "--size", size])
    assert "is not a whole number of bytes" in capsys.readouterr().err


def test_a_step_past_the_recordings_end_is_refused(tmp_path, capsys):
    assert (
        main(["replay", "h100-vmm-1mib", "--step", "9999", "--html", str(tmp_path / "p.html")]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--step 9999: h100-vmm-1mib has 23 steps" in err[0], err
    assert not (tmp_path / "p.html").exists()
