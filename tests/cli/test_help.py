"""Every command's --help opens with what it is for and real examples, and points only to options
that exist where it points (``vmmtui --help`` once named ``--list-scenarios``, an option of
``run`` alone)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from vmmtui.cli import parser

OPTION = re.compile(r"(?<![\w`-])--[a-z][a-z0-9-]*")
#: a command quoted in help text: `vmmtui run --list-scenarios`
QUOTED = re.compile(r"`(vmmtui[^`]*)`")


def parsers() -> dict[str, argparse.ArgumentParser]:
    top = parser(every_command=True)
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    return {"": top, **sub.choices}


def options(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings}


def examples(p: argparse.ArgumentParser) -> list[str]:
    after = (p.description or "").split("\nexample", 1)
    return [ln.strip() for ln in after[1].splitlines()[1:] if ln.strip()] if len(after) > 1 else []


@pytest.mark.parametrize("name", sorted(parsers()))
def test_help_opens_with_what_the_command_is_for_and_an_example(name):
    p = parsers()[name]
    text = p.format_help()
    description = text.split("\n\n", 1)[1]  # after the usage
    assert not description.startswith(("positional arguments", "options")), text[:400]
    assert len(description.split("\n\n", 1)[0]) > 80, "a sentence or two on what it is for"
    found = examples(p)
    assert found and all(e.startswith(f"vmmtui {name}".rstrip()) for e in found), found


@pytest.mark.parametrize("name", sorted(parsers()))
def test_every_example_parses(name):
    for example in examples(parsers()[name]):
        words = shlex.split(example)[1:]
        parser().parse_args(words)  # an unknown option or a bad value: SystemExit(2)


@pytest.mark.parametrize("name", sorted(parsers()))
def test_help_names_only_options_that_exist_where_it_points(name, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")  # no line breaks inside an option's name
    all_parsers = parsers()
    p = all_parsers[name]
    text = p.format_help()
    for quoted in QUOTED.findall(text):  # `vmmtui CMD --opt`: an option of CMD
        words = quoted.split()
        target = all_parsers.get(words[1] if len(words) > 1 else "", all_parsers[""])
        wrong = [w for w in OPTION.findall(quoted) if w not in options(target)]
        assert not wrong, f"`{quoted}` in vmmtui {name} --help: no such option {wrong}"
    if name == "":  # the list of commands: each one's summary names options of that command
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        for choice in sub._choices_actions:
            summary = QUOTED.sub("", choice.help or "")
            wrong = [
                w for w in OPTION.findall(summary) if w not in options(all_parsers[choice.dest])
            ]
            assert not wrong, f"vmmtui --help, on {choice.dest}: no such option {wrong}"
            text = text.replace(choice.help or "", "")
    unquoted = QUOTED.sub("", text)
    wrong = sorted({w for w in OPTION.findall(unquoted) if w not in options(p)})
    assert not wrong, f"vmmtui {name} --help names {wrong}, not options of vmmtui {name}"


@pytest.mark.parametrize("width", [80, 200])
def test_every_help_fits_the_terminal_and_cuts_no_word(monkeypatch, width):
    """The opening text was written at 96 columns: a terminal of 80 cut its words in two."""
    monkeypatch.setenv("COLUMNS", str(width))
    for name, p in parsers().items():
        text = p.format_help()
        assert max(len(line) for line in text.splitlines()) <= width, name
        about = " ".join(p.description.split())
        opening = text.split("\n\n")[1]  # after the usage
        assert max(len(line) for line in opening.splitlines()) <= min(width, 100), name
        assert about in " ".join(text.split()), name  # every word of it, whole and in order


@pytest.mark.parametrize("name", sorted(parsers()))
def test_the_help_a_user_asks_for_is_the_whole_command_s(name, capsys, monkeypatch):
    """A command's module is imported only when the command line names it: ``vmmtui CMD --help``
    parsed from scratch prints what the parser with every command filled in says."""
    monkeypatch.setenv("COLUMNS", "100")
    full = parsers()[name].format_help()
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args([name, "--help"] if name else ["--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == full
