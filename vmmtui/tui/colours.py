"""NO_COLOR: Textual's monochrome filter fails on a segment that carries no style at all (it reads
``style.color`` of None, and the app ends in a traceback); this one gives such a segment the null
style first, and is what the app filters with instead."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import Monochrome

_NULL = Style()


class SafeMonochrome(Monochrome):
    """Every colour turned grey, as Textual's own filter does, for segments without a style too."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        styled = [s if s.style is not None else Segment(s.text, _NULL, s.control) for s in segments]
        return super().apply(styled, background)


def safe_filters(filters: list) -> None:
    """Replace Textual's monochrome filter in an app's ``_filters`` (NO_COLOR) with ours."""
    for k, f in enumerate(filters):
        if type(f) is Monochrome:
            filters[k] = SafeMonochrome()
