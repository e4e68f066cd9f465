"""The one sanitiser: nothing a process can name itself reaches a terminal raw."""

import json

from vmmtui.stream.names import is_clean, shown


def test_printable_names_stay_as_they_are():
    for name in [
        "python3",
        "memfd:vmmtui-buffer (deleted)",
        "/dev/shm/cuda.shm.0.1a2b.1",
        "données",
    ]:
        assert shown(name) == name
        assert is_clean(name)


def test_escape_sequences_newlines_c1_and_bidi_are_shown_escaped():
    hostile = "\x1b]0;PWNED\x07a\x1b[2Jb\nfd 3\x9b31mc\u202ed\x7f"
    out = shown(hostile)
    assert out == "\\x1b]0;PWNED\\x07a\\x1b[2Jb\\nfd 3\\x9b31mc\\u202ed\\x7f"
    assert all(ch.isprintable() for ch in out)
    assert "\n" not in out and "\x1b" not in out and "\x9b" not in out and "\u202e" not in out
    # and through JSON too: nothing JSON leaves raw can re-form the sequence
    assert "\\u001b" not in json.dumps(out, ensure_ascii=False)


def test_a_backslash_cannot_forge_an_escape():
    assert shown("a\\x1b") == "a\\\\x1b"


def test_undecodable_bytes_and_long_names():
    assert shown(b"ok\xff\x1b") == "ok\\xff\\x1b"
    assert shown("x" * 300, limit=10) == "x" * 10 + "…"
