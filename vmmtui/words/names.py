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

__all__ = ["shown", "is_clean", "json_safe", "file_name", "screenshot_name"]

# Characters that change how the rest of a line is laid out: bidi embeddings, overrides and
# isolates, and the invisible marks that spoof a name.
_BIDI = frozenset(
    "\u061c\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2066\u2067\u2068\u2069\u2028\u2029\ufeff"
)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


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


def shown(name: str | bytes, limit: int = 256) -> str:
    """``name`` made safe for any terminal and one line: printable text as it is, every control,
    format or bidi character (and the backslash, so an escape cannot be forged) escaped, and cut to
    ``limit`` characters with an ellipsis."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "surrogateescape")
    if len(name) > limit:
        name = name[:limit] + "…"
    if _plain(name):
        return name
    if not any(_unsafe(ch) for ch in name):
        return name
    out = []
    for ch in name:
        if "\udc80" <= ch <= "\udcff":  # an undecodable byte kept by surrogateescape
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif _unsafe(ch):
            out.append(_escaped(ch))
        else:
            out.append(ch)
    return "".join(out)


def is_clean(name: str) -> bool:
    """True when :func:`shown` would leave ``name`` as it is."""
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
