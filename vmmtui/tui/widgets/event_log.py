"""Every call with its arguments, result and duration, and every notable event, as it happens.

The log draws the lines of the state it is shown (``show(state)``): the state's log book up to its
length. Each line is wrapped once per width and kept; stepping back shows fewer lines of the same
book, so nothing is written again and no line is re-wrapped (a Line API widget: only the rows on
screen are drawn).
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from vmmtui.tui.messages import StepChosen
from vmmtui.view import LogLine, ScreenState

#: a search's match in the log
FOUND = Style(reverse=True, bold=True)
#: the style of a segment that has none: Textual's filters (NO_COLOR's monochrome) read every
#: segment's style, and rich leaves plain text and padding without one
PLAIN = Style.null()


class EventLog(ScrollView, can_focus=True):
    """The state's event log; a click on a line shows the panels as of the step it belongs to."""

    DEFAULT_CSS = """
    EventLog { background: $surface; }
    """

    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "event log"
        self.entries: list[LogLine] = []
        self.era = 0
        #: wrapped rows of entries[:n]: row -> entry index, rows of each entry
        self._rows: list[Strip] = []
        self._row_entry: list[int] = []
        self._wrapped: list[int] = []  # how many rows each wrapped entry has
        self._width = 0
        self._book: object = None
        #: the lines the book had forgotten when last shown (a long trace forgets its oldest)
        self._book_base = 0
        self._followed_to = 0
        #: the entry a search found (drawn reversed until the log changes), or None
        self.found: int | None = None
        #: at most this many entries (the newest) are wrapped and held; None: all (a session's
        #: log is short, a trace's grows by thousands a second)
        self.window: int | None = None
        #: the index in the state's log of ``entries[0]``
        self._base = 0

    # -- from the state ----------------------------------------------------------------------------
    def show(self, state: ScreenState) -> None:
        if state.log.base != self._book_base:  # it forgot lines: wrapped again from the kept
            self._rows, self._row_entry, self._wrapped, self.entries = [], [], [], []
            self._base, self._book_base = 0, state.log.base
        elif state.log is self._book and state.log_len == state.log.base + self._base + len(
            self.entries
        ):
            return
        lines = state.log_lines()
        if self.window is not None:
            lines = self._slide(lines)
        if self.found is not None:  # the log moved on: the reader follows it again
            self.found = None
            self._followed_to = 0
        keep = min(len(lines), len(self.entries))
        if state.log is not self._book:  # another book (ctrl+r, a branch): keep what both share
            keep = next((k for k in range(keep) if lines[k] is not self.entries[k]), keep)
        shrunk = keep < len(self.entries)
        if shrunk:
            self._cut(keep)
        self._book, self.era = state.log, state.era
        self.entries = lines
        self._wrap_new()
        if shrunk or self.following:
            self.follow()

    def _slide(self, lines: list[LogLine]) -> list[LogLine]:
        """The window's part of ``lines``: entries that fell out of it go, rows and all."""
        assert self.window is not None
        base = max(0, len(lines) - self.window)
        if base < self._base:  # stepped back before the window: wrapped again from there
            self._rows, self._row_entry, self._wrapped, self.entries = [], [], [], []
            self._base = base
        elif base > self._base:
            drop = min(base - self._base, len(self.entries))
            rows = sum(self._wrapped[:drop])
            del self._rows[:rows], self._row_entry[:rows], self._wrapped[:drop]
            self.entries = self.entries[drop:]
            self._base = base if not self.entries else self._base + drop
        return lines[self._base :]

    @property
    def line_count(self) -> int:
        """Rows the log holds (wrapped)."""
        return len(self._rows)

    @property
    def lines(self) -> list[Strip]:
        """The wrapped rows, as drawn."""
        return self._rows

    def plain_lines(self) -> list[str]:
        return ["".join(s.text for s in strip) for strip in self._rows]

    def step_at(self, row: int) -> int | None:
        """The step that row ``row`` belongs to; None for a row of no step or an earlier session."""
        if not 0 <= row < len(self._row_entry):
            return None
        line = self.entries[self._row_entry[row] - self._base]
        return line.steps if line.era == self.era else None

    # -- wrapping ----------------------------------------------------------------------------------
    def _cut(self, entries: int) -> None:
        rows = sum(self._wrapped[:entries])
        del self._rows[rows:], self._row_entry[rows:], self._wrapped[entries:]
        self.entries = self.entries[:entries]

    def _wrap_new(self) -> None:
        from vmmtui.words.log import log_text  # with the first entry: not before the first frame

        width = self.scrollable_content_region.width
        if width <= 0:  # not laid out yet: wrapped on the first resize
            return
        if width != self._width:
            self._width = width
            self._rows, self._row_entry, self._wrapped = [], [], []
        console: Console = self.app.console
        options = console.options.update_width(width)
        for k in range(len(self._wrapped), len(self.entries)):
            said = log_text(self.entries[k])  # worded here, once: the fold keeps it as data
            if (
                not said.plain
            ):  # an entry with nothing to say (a refusal its finding says) has no row
                self._wrapped.append(0)
                continue
            lines = list(Segment.split_lines(console.render(said, options.update(no_wrap=False))))
            strips = [
                Strip([Segment(t, s or PLAIN, c) for t, s, c in line]).adjust_cell_length(
                    width, PLAIN
                )
                for line in lines
            ] or [Strip.blank(width, PLAIN)]
            self._rows.extend(strips)
            self._row_entry.extend([self._base + k] * len(strips))
            self._wrapped.append(len(strips))
        self.virtual_size = Size(width, len(self._rows))
        self.refresh()

    @property
    def following(self) -> bool:
        """The log shows its end (the reader has not scrolled up since it was last moved there)."""
        return self.scroll_offset.y >= self._followed_to

    def follow(self, tries: int = 3) -> None:
        """Scroll to the last row now (a screenshot taken after this refresh shows it).

        Before the first layout has given the log its height (a replay opened at ``--step N``)
        the scroll is clamped short of the end: it is tried again after the refresh."""
        end = max(0, len(self._rows) - self.scrollable_content_region.height)
        self.scroll_to(y=end, animate=False, immediate=True)
        self._followed_to = self.scroll_offset.y  # where it got (the layout may lag a refresh)
        if self._followed_to < end and tries > 1:
            self.call_after_refresh(self._follow_again, end, tries - 1)

    def _follow_again(self, end: int, tries: int) -> None:
        if self.found is None and self.scroll_offset.y == self._followed_to < end:
            self.follow(tries)

    def on_resize(self, event: events.Resize) -> None:
        following = self.following
        self._wrap_new()
        if following:
            self.follow()

    def show_found(self, entry: int) -> None:
        """Mark entry ``entry`` (a search's match) and scroll it to the middle of the log."""
        self.found = entry
        if 0 <= entry - self._base < len(self._wrapped):
            row = sum(self._wrapped[: entry - self._base])
            self.scroll_to(
                y=max(0, row - self.scrollable_content_region.height // 2),
                animate=False,
                immediate=True,
            )
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        if row >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        strip = self._rows[row]
        if self.found is not None and self._row_entry[row] == self.found:
            strip = strip.apply_style(FOUND)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        steps = None if offset is None else self.step_at(self.scroll_offset.y + offset.y)
        if steps is not None:
            event.stop()
            self.post_message(StepChosen(steps))
