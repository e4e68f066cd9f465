"""The status line's words: first where the screen is (live, a past frame, a replay), last what the
frames leave out. One count per concept: a frame is a call that matters, so "call N/M" counts
frames; the calls the tracer counted beyond them (its closing line's "N calls") are said once, as
the calls not drawn, never as a second total beside the first.
Then the parts of ``ScreenState.status``, each a fact (a verdict, a count) worded here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from vmmtui.stream.events import ScenarioOutcome, SessionFinished
from vmmtui.stream.values import Verification
from vmmtui.words import narration as say

if TYPE_CHECKING:
    from vmmtui.view.model import Found, KcmpSeen, StatusFact

SEP = " · "


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def calls_not_drawn(unframed: Mapping[str, int]) -> str:
    """The calls traced that have no frame, by call: ``+3 calls not drawn: close on fds with
    nothing shared`` (with the frames' count, the tracer's). "" when every call is a frame."""
    n = sum(unframed.values())
    if not n:
        return ""
    if len(unframed) == 1:
        kinds = next(iter(unframed))
    else:
        parts = sorted(unframed.items(), key=lambda kv: (-kv[1], kv[0]))
        kinds = ", ".join(f"{c} {name}" for name, c in parts)
    return f"+{n} call{_s(n)} not drawn: {kinds} on fds with nothing shared"


def calls_not_kept(dropped: int, recorded: bool) -> str:
    """The frames a long live trace forgot (``dropped``), and where they still are."""
    if not dropped:
        return ""
    where = ": see the recording" if recorded else " (--record FILE keeps every call)"
    return f"… {dropped} older call{_s(dropped)} not kept{where}"


def calls_behind(not_drawn: int, behind: bool, recorded: bool, findings: int = 0) -> str:
    """The calls (and, far behind, the findings) a live screen did not draw because it fell
    behind the program (``behind``: it still is), and where they are: the run's own counts, its
    verdict and the recording have every one."""
    if not not_drawn and not findings:
        return ""
    where = "the recording keeps them" if recorded else "--record FILE keeps every call"
    n = f"{not_drawn:,} call{_s(not_drawn)}"
    if findings:
        n += f", {findings:,} finding{_s(findings)}"
    n += " not drawn"
    if behind:
        return f"falling behind: {n}, {where}"
    return f"{n} while the screen was behind ({where})"


def trace_where(
    latest: int,
    shown: int | None = None,
    *,
    ended: bool = False,
    starting: bool = False,
    folding: int = 0,
    dropped: int = 0,
    recorded: bool = False,
    not_drawn: int = 0,
    behind: bool = False,
    findings_not_drawn: int = 0,
) -> str:
    """A live trace: ``LIVE · call 57`` (``latest``: the frames' count), or a past frame
    (``shown``: ``AS OF CALL 12 of 57 · end: live``); ``folding``: events not yet folded;
    ``not_drawn``: calls the screen left out while it was behind (``behind``: it still is)."""
    if starting:
        return "STARTING · loading the eBPF probes (the kernel checks each program first)"
    kept = calls_not_kept(dropped, recorded)
    late = calls_behind(not_drawn, behind and not ended, recorded, findings_not_drawn)
    if shown is None:
        busy = f"folding {folding} more events" if folding > 0 else ""
        first = f"{'ENDED' if ended else 'LIVE'} · call {latest}"
        return SEP.join(p for p in (first, late, busy, kept) if p)
    return SEP.join(p for p in (f"AS OF CALL {shown} of {latest}", "end: live", late, kept) if p)


def replay_where(unit: str, at: int, total: int, unframed: Mapping[str, int] | None = None) -> str:
    """A replay: ``REPLAY · step 3/23``; a trace's, with the calls its frames leave out."""
    return SEP.join(
        p for p in (f"REPLAY · {unit} {at}/{total}", calls_not_drawn(unframed or {})) if p
    )


def session_where(shown: int | None) -> str:
    """The live demo: nothing while live; ``AS OF STEP 4 · end: live`` at a past step."""
    return "" if shown is None else f"AS OF STEP {shown} · end: live"


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
    if isinstance(fact, str):
        return f"could not start: {fact}" if key == "error" else f"scenario {fact}"
    if key == "kcmp":
        seen = cast("KcmpSeen", fact)  # the fold's: words do not import the view
        return say.kcmp_verdict(seen.verdict, not seen.open, seen.step, terse=True).plain
    found = cast("Found", fact)
    return f"{found.good} shared/imported · {found.bad} to look at"
