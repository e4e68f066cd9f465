"""Failure scenarios: seed 000's troubleshooting table made to really happen, one at a time.

A scenario is one piece of data (``Scenario``): how it edits the plan, which behaviours it asks of
each worker (``flags``), what the session does around which step (``hooks``: kill, freeze, an
intruder, a stale socket), and what outcome it promises. The session and the worker read only
these fields; no scenario's name appears anywhere else in the package. ``register`` adds one
(the tests define their own).
"""

from __future__ import annotations

from vmmtui.scenarios.catalogue import BUILT_IN
from vmmtui.scenarios.model import (
    ANY,
    ANY_ERROR,
    VERIFIED,
    Drop,
    Hook,
    RunEarly,
    Scenario,
    StopAfter,
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in BUILT_IN}


def register(scenario: Scenario) -> Scenario:
    SCENARIOS[scenario.name] = scenario
    return scenario


def get(name: str | None) -> Scenario | None:
    """The scenario called ``name``; None for no scenario; KeyError with the known names otherwise."""
    if name is None:
        return None
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


__all__ = [
    "ANY",
    "ANY_ERROR",
    "VERIFIED",
    "SCENARIOS",
    "Drop",
    "Hook",
    "RunEarly",
    "Scenario",
    "StopAfter",
    "get",
    "register",
]
