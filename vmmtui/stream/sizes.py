"""Byte sizes as users type them (``1MiB``, ``64MB``, ``1048576``) and as we print them."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kib": 1 << 10,
    "kb": 10**3,
    "m": 1 << 20,
    "mib": 1 << 20,
    "mb": 10**6,
    "g": 1 << 30,
    "gib": 1 << 30,
    "gb": 10**9,
    "t": 1 << 40,
    "tib": 1 << 40,
    "tb": 10**12,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


class SizeError(ValueError):
    """A size the user typed that we cannot use; the message is one line meant for them."""


def parse_size(text: str | int) -> int:
    """Parse ``text`` into a positive byte count.

    ``KiB/MiB/GiB/TiB`` (and bare ``K/M/G/T``) are powers of two, ``KB/MB/GB/TB`` powers of ten.
    """
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise SizeError(
                f"invalid size {text!r}: write a positive number of bytes such as 1048576, 1MiB, 64MB or 2GiB"
            )
        number, unit = m.groups()
        factor = _UNITS.get(unit.lower())
        if factor is None:
            raise SizeError(
                f"invalid size unit {unit!r} in {text!r}: use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
            )
        if "." in number:
            exact = float(number) * factor
            if exact != int(exact):  # 1.5 bytes, 0.1KiB: no such size, and not silently 1 or 102
                raise SizeError(f"invalid size {text!r}: {exact:g} is not a whole number of bytes")
            value = int(exact)
        else:
            value = int(number) * factor
    if value <= 0:
        raise SizeError(f"invalid size {text!r}: the size must be greater than 0 bytes")
    return value


def format_size(n: int) -> str:
    """``2097152`` → ``2 MiB``; exact binary units when they divide, else one decimal."""
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n // factor} {unit}" if n % factor == 0 else f"{n / factor:.1f} {unit}"
    return f"{n} B"


def align_up(n: int, granularity: int) -> int:
    """Round ``n`` up to a multiple of ``granularity`` (cuMemCreate and cuMemMap require it)."""
    return -(-n // granularity) * granularity
