"""The one sanitiser for names that come from outside: ``/proc`` (comm, cmdline, fd targets,
memfd and ``/dev/shm`` names), the wire and recordings.

Any process can name itself or a file with terminal escape sequences, newlines or bidi overrides;
written raw they retitle or clear the user's terminal, forge report lines or reverse text. Every
renderer (console, ``--json``, transcripts, Textual) shows such a name only through :func:`shown`,
which keeps printable text and writes everything else as a visible escape (``\\x1b``, ``\\n``,
``\\u202e``), so the name is still recognisable and can be searched for.
"""

from __future__ import annotations

import unicodedata

__all__ = ["Escaped", "shown", "is_clean", "defanged", "json_safe", "file_name", "screenshot_name"]

# Characters that change how the rest of a line is laid out: bidi embeddings, overrides and
# isolates, and the invisible marks that spoof a name.
_BIDI = frozenset(
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2066\u2067\u2068\u2069\u2028\u2029\ufeff"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
#: what :func:`defanged` leaves as it is: a call's result or a failure's text spans lines
_LAYOUT = "\n\t"


def _escaped(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    if ch == "\\" or ch in _BIDI:
        return True
    # Cc: C0, DEL and C1 (U+0080–U+009F, CSI U+009B among them); Cf: format characters;
    # Cs: lone surrogates left by surrogateescape decoding of undecodable bytes; Zl/Zp: separators.
    return unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Zl", "Zp"}


def _plain(name: str) -> bool:
    """Printable ASCII without a backslash: nothing to escape (the common case, checked in C)."""
    return name.isascii() and name.isprintable() and "\\" not in name


class Escaped(str):
    """Text whose controls and backslashes :func:`defanged` has already escaped, line breaks and
    tabs aside: :func:`shown` escapes only those, so a name read from a recording is shown as the
    live inspector shows it, ``\\x1b`` and not ``\\\\x1b`` (as ``markupsafe.Markup`` marks HTML)."""

    __slots__ = ()


def shown(name: str | bytes, limit: int = 256) -> str:
    """``name`` made safe for any terminal and one line: printable text as it is, every control,
    format or bidi character (and the backslash, so an escape cannot be forged) escaped, and cut to
    ``limit`` characters with an ellipsis."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    if isinstance(name, Escaped):
        text = str(name)[:limit] + ("…" if len(name) > limit else "")
        return "".join(_NAMED.get(ch, ch) if ch in _LAYOUT else ch for ch in text)
    if len(name) > limit:
        name = name[:limit] + "…"
    if _plain(name):
        return name
    if not any(_unsafe(ch) for ch in name):
        return name
    return _escaped_all(name, "")


def _escaped_all(name: str, keep: str) -> str:
    out = []
    for ch in name:
        if ch in keep:
            out.append(ch)
        elif "\udc80" <= ch <= "\udcff":  # an undecodable byte kept by surrogateescape
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif _unsafe(ch):
            out.append(_escaped(ch))
        else:
            out.append(ch)
    return "".join(out)


def defanged(text: str) -> str:
    """``text`` read from outside (a recording, a page's wire) with nothing a terminal, a page or a
    Markdown viewer acts on: unchanged when it holds no control, format or bidi character besides
    line breaks and tabs (every real recording's text), else each such character, and every
    backslash, written as :func:`shown` writes it, line breaks and tabs kept. Unlike ``shown`` it
    neither cuts nor joins lines, so it can be applied to every string of a recording once, where it
    is read; the result is :class:`Escaped`, which ``shown`` does not escape again."""
    if isinstance(text, Escaped) or _plain(text):
        return text
    if not any(_unsafe(ch) for ch in text if ch not in _LAYOUT and ch != "\\"):
        return text
    return Escaped(_escaped_all(text, _LAYOUT))


def is_clean(name: str) -> bool:
    """True when :func:`shown` would leave ``name`` as it is."""
    if isinstance(name, Escaped):
        return not any(ch in name for ch in _LAYOUT)
    return _plain(name) or not any(_unsafe(ch) for ch in name)


def json_safe(text: str) -> str:
    """A JSON text with every character :func:`shown` would escape (C1 such as CSI U+009B, DEL, bidi
    overrides, line separators, lone surrogates) written as a JSON ``\\uXXXX`` escape: it reads back
    as the same value, raw names intact for tools such as jq, and a terminal it is printed on acts on
    none of it. (``json.dumps`` already escapes C0 controls, quotes and backslashes.)"""
    if text.isascii() and "\x7f" not in text:
        return text
    out = []
    for ch in text:
        if ch != "\\" and _unsafe(ch):
            code = ord(ch)
            if code > 0xFFFF:  # a format character beyond the BMP: a UTF-16 surrogate pair
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def file_name(text: str, limit: int = 80) -> str:
    """``text`` (a title, a step, a recording's machine) as a portable file name: ASCII letters,
    digits, ``.``, ``_`` and ``-`` only (accents dropped, anything else one ``-``), never empty,
    at most ``limit`` characters. A name like ``vmmtui REPLAY · H100 on vm`` would otherwise need
    quoting in every shell and break on file systems and archives that are not UTF-8."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    out, dash = [], False
    for ch in plain:
        keep = ch.isalnum() or ch in "._"
        if keep:
            out.append(ch)
        elif not dash:
            out.append("-")
        dash = not keep
    return "".join(out).strip("-._")[:limit].rstrip("-._") or "vmmtui"


def screenshot_name(title: str) -> str:
    """A screenshot's file name: the app's title and the time, as :func:`file_name` (Textual's own
    keeps the title's spaces and middle dots)."""
    from datetime import datetime

    return file_name(f"{title} {datetime.now():%Y-%m-%d %H%M%S}") + ".svg"
