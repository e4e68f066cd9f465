"""The command palette's entries: every key binding, findable by name."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

COMMANDS = [
    ("Next step", "step", "run the next step of the plan (space / n)"),
    ("Run to the end", "run_all", "run every remaining step (r)"),
    ("Toggle autoplay", "autoplay", "play the steps by themselves (a)"),
    ("Faster autoplay", "faster", "shorter pause between steps (+)"),
    ("Slower autoplay", "slower", "longer pause between steps (-)"),
    ("Restart", "restart", "stop the workers, clean everything, start a fresh session (ctrl+r)"),
    ("Screenshot", "screenshot", "save an SVG screenshot (s)"),
    ("Fold other fds", "fold", "show or hide the fds that are not ours: /dev/nvidia*, stdio, pipes (f)"),
    ("Choose a scenario", "scenario", "a normal run or one failure from the troubleshooting table (c)"),
    ("Help", "help", "keys and what the panels show (?)"),
    ("Quit", "quit", "clean up and quit (q)"),
]


class InspectorCommands(Provider):
    async def discover(self) -> Hits:
        for name, action, help_text in COMMANDS:
            yield DiscoveryHit(name, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in COMMANDS:
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), partial(self.app.run_action, action), help=help_text)
