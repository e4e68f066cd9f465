"""The status line's words: each part of ``ScreenState.status`` (a fact) as the line says it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from vmmtui.backends.pattern import Verification
from vmmtui.stream.events import KcmpVerdict, ScenarioOutcome, SessionFinished
from vmmtui.words import narration as say

if TYPE_CHECKING:
    from vmmtui.view.model import StatusFact


def status_words(status: Mapping[str, StatusFact]) -> dict[str, str]:
    """Each part of the status line, worded, in its order."""
    return {key: part_words(key, fact) for key, fact in status.items()}


def part_words(key: str, fact: StatusFact) -> str:
    if isinstance(fact, ScenarioOutcome):
        return say.outcome(fact).plain
    if isinstance(fact, SessionFinished):
        return say.verdict(fact.verified).plain
    if isinstance(fact, Verification):
        return say.verification_word(fact)
    if isinstance(fact, KcmpVerdict):
        return say.kcmp_verdict(fact).plain
    if isinstance(fact, str):
        return f"could not start: {fact}" if key == "error" else f"scenario {fact}"
    return f"{fact.good} shared/imported · {fact.bad} to look at"
