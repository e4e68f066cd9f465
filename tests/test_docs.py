"""The front door and the documentation site: README fits two screens, the site builds with
``mkdocs build --strict``, every command the pages show is one vmmtui really takes, and no page
speaks of how the project was made or gives a stale count."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui import cli
from vmmtui.cli import serve
from vmmtui.record import gallery
from vmmtui.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: the pages of the site (docs/lecture-notes.md is data for `replay --notes`, shown inside replay.md)
PAGES = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "lecture-notes.md")
DOCUMENTS = [README, *PAGES]
#: a log of past runs quotes the counts of its day
LOGS = {"gpu-runs.md"}

FENCE = re.compile(r"^(```|~~~)")
#: how a command line is shown: `vmmtui …`, `$ vmmtui …`, `.venv/bin/vmmtui …`, `sudo …` of these
PROGRAMS = {"vmmtui", ".venv/bin/vmmtui"}
SEPARATORS = {"&&", "||", ";", "|", "&"}


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every line inside a fenced code block, but a ``text`` block: that
    is a program's output (a test's failure in docs/testing.md), its lines are not commands."""
    inside, output, found = False, False, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line.strip()):
            inside = not inside
            output = inside and line.strip()[3:].strip() == "text"
            continue
        if inside and not output:
            found.append((number, line.strip()))
    return found


def commands(line: str) -> list[list[str]]:
    """The vmmtui command lines in one shell line (``a && vmmtui run; b``), arguments only."""
    line = line.removeprefix("$ ")
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    found, words = [], []
    for token in [*lexer, ";"]:
        if token not in SEPARATORS:
            words.append(token)
            continue
        if words[:1] == ["sudo"]:  # sudo [-E] .venv/bin/vmmtui …: the command is checked too
            words = words[1:]
            while words and words[0].startswith("-"):
                words = words[1:]
        if words and words[0] in PROGRAMS:
            found.append(words[1:])
        words = []
    return found


def shown_commands() -> list[tuple[str, list[str]]]:
    shown = []
    for path in DOCUMENTS:
        for number, line in code_lines(path):
            for argv in commands(line):
                shown.append((f"{path.relative_to(ROOT)}:{number}", argv))
                if "--" in argv and argv[argv.index("--") + 1 :][:1] == [
                    "vmmtui"
                ]:  # trace -- vmmtui
                    shown.append(
                        (f"{path.relative_to(ROOT)}:{number}", argv[argv.index("--") + 2 :])
                    )
    return shown


def parse(argv: list[str]) -> str | None:
    """Why the real parser refuses argv, or None; nothing is run."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = cli.parser().parse_args(argv)
    except SystemExit as exc:
        return err.getvalue().strip() or f"exit {exc.code}"
    if args.command == "serve":  # serve's own options may follow `replay NAME`: serve takes them
        if why := serve.take_own_options(args):
            return why
        if args.args[:1] == ["replay"]:  # serve replay NAME [options]: replay's options
            return parse(args.args)
    return None


def test_readme_fits_on_two_screens():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: the rest belongs in docs/"


def test_every_link_and_picture_of_the_readme_exists():
    """The site's build checks the pages' links; the README's are checked here."""
    for target in re.findall(r"\]\(([^)\s]+)\)", README.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # an address on the web
        path = target.split("#")[0]
        assert (ROOT / path).exists(), f"README.md links {target}, which does not exist"


def test_the_pages_are_the_sites_nav():
    """Every page is in mkdocs.yml's nav, and every page of the nav exists."""
    config = (ROOT / "mkdocs.yml").read_text()
    nav = re.findall(r"^  - [^:]+: (\S+\.md)$", config, re.M)
    assert sorted(nav) == sorted(p.name for p in PAGES)


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: p.name)
def test_no_page_speaks_of_how_the_project_was_made(path: Path):
    text = path.read_text()
    for said in (
        r"\bissues? #?\d+",
        r"\bthis round\b",
        r"\bbefore this round\b",
        r"\bdevelopment (VM|machine)\b",
        r"\blent\b",
        r"\bother engineers\b",
        r"\bsession \d+\b",
    ):
        found = re.search(said, text, re.I)
        assert found is None, f"{path.name}: {found.group(0)!r}"


def test_every_command_shown_is_a_real_vmmtui_command():
    shown = shown_commands()
    assert len(shown) > 40, "the pages show commands: the code-block reader lost them"
    refused = [
        f"{where}: vmmtui {shlex.join(argv)}: {why}"
        for where, argv in shown
        if (why := parse(argv))
    ]
    assert not refused, "\n".join(refused)


def test_the_command_reader_catches_a_command_that_does_not_exist():
    """The check above can fail: an unknown option, command or scenario is refused."""
    assert commands("python3 -m venv .venv && .venv/bin/vmmtui run --json") == [["run", "--json"]]
    assert commands("$ vmmtui replay h100-vmm-1mib  # a comment") == [["replay", "h100-vmm-1mib"]]
    assert commands("sudo .venv/bin/vmmtui trace -p 4242") == [["trace", "-p", "4242"]]
    assert parse(["run", "--no-such-option"])
    assert parse(["frobnicate"])
    assert parse(["run", "--scenario", "no-such-scenario"])
    assert parse(["serve", "replay", "h100-vmm-1mib", "--no-such-option"])
    assert parse(["serve", "replay", "h100-vmm-1mib", "--port", "0"])
    assert parse(["serve", "--port", "8001", "replay", "h100-vmm-1mib", "--step", "3"]) is None
    assert (
        parse(["serve", "replay", "h100-vmm-1mib", "--max-pages", "30", "--host", "0.0.0.0"])
        is None
    )


def test_gallery_names_shown_exist():
    """`vmmtui replay NAME` of the pages opens a recording of the gallery."""
    for where, argv in shown_commands():
        if argv[:1] == ["serve"] and "replay" in argv:
            argv = argv[argv.index("replay") :]
        if argv[:1] != ["replay"]:
            continue
        names = [w for w in argv[1:] if not w.startswith("-") and "." not in w and "/" not in w]
        for name in names[:1]:
            assert gallery.find(name), f"{where}: no recording {name!r} in the gallery"


@pytest.mark.parametrize("path", [p for p in DOCUMENTS if p.name not in LOGS], ids=lambda p: p.name)
def test_counts_are_current(path: Path):
    text = path.read_text()
    for said in re.findall(r"\b(\d+) recordings\b", text):
        assert int(said) == len(gallery.entries()), f"{path.name}: {said} recordings"
    for said in re.findall(r"\b(\d+) (?:failures|failure scenarios|scenarios)\b", text):
        assert int(said) == len(SCENARIOS), f"{path.name}: {said} scenarios"


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path):
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs and mkdocs-material are not installed (pip install -e '.[docs]')")
    site = tmp_path / "site"
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert (site / "index.html").exists() and (site / "replay" / "index.html").exists()
    page = (site / "steps" / "index.html").read_text()
    for picture in re.findall(r'src="\.\./(screenshots/[^"]+\.png)"', page):
        assert (site / picture).exists(), picture
    assert "cuMemCreate made physical GPU memory" in (site / "replay" / "index.html").read_text()
