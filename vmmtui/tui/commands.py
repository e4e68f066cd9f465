"""The command palette's entries and the help screen's key table, both made from the app's BINDINGS."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

from textual.binding import Binding, BindingType
from textual.command import DiscoveryHit, Hit, Hits, Provider

#: how keys are written for people (Textual's names otherwise)
KEY_NAMES = {
    "question_mark": "?",
    "plus": "+",
    "minus": "-",
    "left": "←",
    "right": "→",
    "slash": "/",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
}


@dataclass(frozen=True)
class Command:
    """One action with every key bound to it, its short name and its longer help."""

    action: str
    keys: tuple[str, ...]
    name: str
    help: str

    @property
    def key_text(self) -> str:
        return " / ".join(f"`{k}`" for k in self.keys)


def key_name(key: str) -> str:
    return KEY_NAMES.get(key, key)


def commands(bindings: Iterable[BindingType]) -> list[Command]:
    """One Command per action, in the order the bindings first name it; keys in binding order."""
    found: dict[str, Command] = {}
    for b in bindings:
        binding = b if isinstance(b, Binding) else Binding(*b)
        keys = tuple(key_name(k.strip()) for k in binding.key.split(","))
        known = found.get(binding.action)
        if known is None:
            found[binding.action] = Command(
                binding.action, keys, binding.description, binding.tooltip or binding.description
            )
        else:
            found[binding.action] = Command(known.action, known.keys + keys, known.name, known.help)
    return list(found.values())


class InspectorCommands(Provider):
    """Every key binding of the app, findable by name in the palette (ctrl+p)."""

    @property
    def entries(self) -> list[Command]:
        return commands(self.app.BINDINGS)

    async def discover(self) -> Hits:
        for c in self.entries:
            yield DiscoveryHit(
                c.name, partial(self.app.run_action, c.action), help=f"{c.help} ({c.key_text})"
            )

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for c in self.entries:
            score = matcher.match(f"{c.name} {c.help}")
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(c.name),
                    partial(self.app.run_action, c.action),
                    help=f"{c.help} ({c.key_text})",
                )
