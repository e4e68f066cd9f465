"""The footer of keys, each whole or not at all.

Textual's footer lays its keys in a row and cuts the row at the command palette's key: at 80
columns the last one showed as a stray label ("a▏", "^r Restar▏"). This one hides every key from
the first that does not fit whole; ``?`` lists them all (the keys are ordered so that next, quit
and help come first: ``vmmtui.tui.keys``).
"""

from __future__ import annotations

from textual import events
from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeysFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self._hide_cut)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.recompose)  # every key back, then the cut ones hidden again

    def _hide_cut(self, tries: int = 5) -> None:
        keys = list(self.query(FooterKey))
        palette = [k for k in keys if k.has_class("-command-palette")]
        row = [k for k in keys if k not in palette]
        if row and not row[0].region.width:  # not laid out yet
            if tries > 1:
                self.call_after_refresh(self._hide_cut, tries - 1)
            return
        edge = palette[0].region.x if palette and palette[0].region.width else self.region.right
        cut = False
        for key in row:
            # past the edge, or wholly beyond it (a key off the row has no region on screen)
            cut = cut or key.region.right > edge or not key.region.width
            if cut:
                key.display = False
