"""`vmmtui serve`'s guard and page, in-process (no viewer starts): every request needs the token,
the page asks nothing of the internet; trace's advice widens nobody's rights; doctor says
whether serve can run."""

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import WSServerHandshakeError
from aiohttp.test_utils import TestClient, TestServer

from vmmtui.cli.webserver import FORBIDDEN, ViewerServer
from vmmtui.doctor.checks import serve_finding
from vmmtui.trace.loader import privileges_missing

TOKEN = "t" * 43
#: every address a page or its CSS names: src/href attributes, url(...), and bare http(s) URLs
ADDRESSES = re.compile(
    r"""(?:src|href)\s*=\s*["']([^"']+)["']|url\(\s*["']?([^"')]+)|(https?://[^\s"'<>)]+)"""
)


#: comments name addresses that nothing fetches (xterm.css credits term.js)
COMMENTS = re.compile(r"/\*.*?\*/|<!--.*?-->", re.S)


def server(max_pages: int = 4) -> ViewerServer:
    # a command that would show if it ever ran: nothing may start in these tests
    return ViewerServer(
        "false", host="127.0.0.1", port=8000, title="vmmtui t", token=TOKEN, max_pages=max_pages
    )


async def client() -> TestClient:
    app = await server()._make_app()
    c = TestClient(TestServer(app))
    await c.start_server()
    return c


@pytest.mark.asyncio
async def test_without_the_token_every_route_is_403():
    c = await client()
    try:
        for path in (
            "/",
            "/?token=wrong",
            f"/?token={TOKEN[:-1]}",
            "/static/js/textual.js",
            "/static/fonts/RobotoMono-VariableFont_wght.ttf",
            "/static/",
            "/download/abc",
        ):
            r = await c.get(path)
            assert r.status == 403, path
            assert await r.text() == FORBIDDEN
            assert "Set-Cookie" not in r.headers
        with pytest.raises(WSServerHandshakeError) as refused:
            await c.ws_connect("/ws?width=80&height=24")
        assert refused.value.status == 403
        c.session.cookie_jar.update_cookies({"vmmtui-serve-8000": "wrong"})
        with pytest.raises(WSServerHandshakeError) as refused:
            await c.ws_connect("/ws")
        assert refused.value.status == 403
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_another_origin_is_refused_even_with_the_token():
    """A page of another site (or of another local server) cannot use the browser's cookie."""
    c = await client()
    try:
        r = await c.get(f"/?token={TOKEN}")
        assert r.status == 200
        with pytest.raises(WSServerHandshakeError) as refused:
            await c.ws_connect(f"/ws?token={TOKEN}", headers={"Origin": "http://127.0.0.1:9"})
        assert refused.value.status == 403
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_the_token_opens_the_page_and_sets_a_cookie_that_opens_the_rest():
    c = await client()
    try:
        r = await c.get(f"/?token={TOKEN}")
        assert r.status == 200
        cookie = r.cookies["vmmtui-serve-8000"]
        assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
        c.session.cookie_jar.update_cookies({"vmmtui-serve-8000": TOKEN})
        r = await c.get("/static/js/textual.js")  # as the browser asks: the cookie, no query
        assert r.status == 200
    finally:
        await c.close()


@pytest.mark.asyncio
async def test_the_page_and_its_css_ask_nothing_beyond_the_server_and_the_font_is_served():
    """A lecture hall may drop outbound traffic: the page must not wait for a web font."""
    c = await client()
    try:
        c.session.cookie_jar.update_cookies({"vmmtui-serve-8000": TOKEN})
        page = COMMENTS.sub("", await (await c.get(f"/?token={TOKEN}")).text())
        texts = {"/": page}
        for m in ADDRESSES.finditer(page):
            a = m.group(1) or m.group(2) or m.group(3)
            if a.endswith(".css"):
                texts[a] = COMMENTS.sub("", await (await c.get(a)).text())
        named = [
            m.group(1) or m.group(2) or m.group(3)
            for text in texts.values()
            for m in ADDRESSES.finditer(text)
        ]
        outside = [a for a in named if re.match(r"(?:https?:)?//", a)]
        assert not outside, outside
        fonts = {a for a in named if a.endswith((".ttf", ".woff", ".woff2"))}
        assert fonts, "the page names no font of its own: it would fall back to the browser's"
        for font in fonts:
            r = await c.get(font)
            assert r.status == 200 and len(await r.read()) > 50_000, font
    finally:
        await c.close()


#: what eBPF advice must never say: an install of a name from a package index (whoever registers
#: the name gets the rights), or capabilities given to an interpreter other programs run
UNSAFE = ("setcap", "pip install vmmtui", "pip install -U vmmtui", "--copies")


def assert_safe_advice(message: str) -> None:
    for bad in UNSAFE:
        assert bad not in message, (bad, message)
    assert 'sudo "$(command -v vmmtui)" trace ...' in message, message
    here = shlex.quote(sys.executable)
    assert f"`sudo {here} -m vmmtui trace ...`" in message, message


def test_the_trace_advice_names_what_is_missing_and_only_sudo_with_the_users_own_vmmtui():
    for caps in (0, 1 << 39, 1 << 38):
        message = privileges_missing(caps)
        for fact in ("CAP_BPF", "CAP_PERFMON", "BTF", "kernel.unprivileged_bpf_disabled"):
            assert fact in message, fact
        assert_safe_advice(message)


def test_doctors_capability_line_gives_the_same_safe_advice(monkeypatch):
    from vmmtui.trace import loader

    monkeypatch.setattr(loader, "_cap_eff", lambda: 0)
    found = {name: text for name, text, _ in loader.readiness()}
    assert found["capabilities"].startswith("missing: run your own vmmtui as root"), found
    assert_safe_advice(found["capabilities"])


def test_no_page_or_message_of_the_project_advises_setcap_or_installing_vmmtui_from_an_index():
    """No message of vmmtui names setcap at all; no page or script installs vmmtui by name from
    an index (a page may warn against setcap: docs/pytorch.md does)."""
    root = Path(__file__).resolve().parents[2]
    code = [*root.glob("vmmtui/**/*.py")]
    pages = [*code, *root.glob("docs/**/*.md"), root / "README.md", *root.glob("scripts/*")]
    said = [f"{f.relative_to(root)}: setcap" for f in code if "setcap" in f.read_text()]
    said += [
        f"{f.relative_to(root)}: {bad}"
        for f in pages
        if f.is_file()
        for bad in ("pip install vmmtui", "pip install -U vmmtui")
        if bad in f.read_text(errors="replace")
    ]
    assert not said, said


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and setpriv to run a process without the capabilities",
)
def test_a_process_without_the_capabilities_is_told_the_same():
    """Real: the capabilities dropped (setpriv), the message as trace would print it."""
    res = subprocess.run(
        ["setpriv", "--bounding-set=-all", "--inh-caps=-all", sys.executable, "-c"]
        + ["from vmmtui.trace.loader import why_not; print(why_not())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert "missing CAP_BPF and CAP_PERFMON" in res.stdout, res.stdout
    assert_safe_advice(res.stdout)


def test_doctor_says_whether_serve_can_run(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        f = serve_finding(taken)
    assert f.ok and f.value.startswith("can run (textual-serve ") and f"port {taken}" in f.value
    assert "taken" in f.value and "--port" in f.value
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    assert f"port {free} on localhost free" in serve_finding(free).value
    monkeypatch.setitem(sys.modules, "textual_serve", None)  # as where it is not installed
    f = serve_finding(free)
    assert f.ok is False and "cannot run" in f.value and "pip install textual-serve" in f.value


def test_serves_own_options_are_taken_from_after_replay_name_and_checked():
    from vmmtui.cli import parser
    from vmmtui.cli.serve import take_own_options

    args = parser().parse_args(
        ["serve", "replay", "cpu-memfd-1mib", "--max-pages=3", "--shots", "d", "--step", "2"]
    )
    assert take_own_options(args) is None
    assert (args.max_pages, args.shots) == (3, "d")
    assert args.args == ["replay", "cpu-memfd-1mib", "--step", "2"]
    args = parser().parse_args(["serve", "replay", "cpu-memfd-1mib", "--max-pages", "0"])
    assert take_own_options(args) == "argument --max-pages: 0 pages: choose 1 to 64"


def test_serve_replay_takes_a_teachers_notes_checked_once_and_by_their_whole_path(
    tmp_path, monkeypatch, capsys
):
    from vmmtui.cli.serve import command_line

    notes = tmp_path / "n.md"
    notes.write_text("# Lecture\n\n## 3\nthe handle is a number in this process only\n")
    monkeypatch.chdir(tmp_path)
    argv = command_line(["replay", "h100-vmm-1mib", "--notes", "n.md"])
    assert argv is not None and argv[-2:] == ["--notes", str(notes)]
    notes.write_text("## 99\nno such step\n")
    assert command_line(["replay", "h100-vmm-1mib", "--notes", "n.md"]) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no step 99 in this recording" in err, err
