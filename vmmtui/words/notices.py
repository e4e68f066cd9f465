"""Every notice in words: the session says what happened as a code and its facts (``Notice.code``,
``Notice.facts``, ``stream/events.py``'s ``NoticeCode``), and the sentence is made here, where it
is drawn, so that a recording replayed by a later vmmtui reads in that version's words.

A notice without a code is one that an older vmmtui recorded in its words, or that a layer below
words/ still words (tests/test_house.py's ratchet lists those): it is shown as it came. A code
this version does not know, or facts that do not fit it (a hostile or damaged recording), is
shown as its code and facts, never as an error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from vmmtui.stream.events import Notice, NoticeCode
from vmmtui.stream.failures import Failure
from vmmtui.words.troubleshooting import facts as failure_facts

Facts = Mapping[str, str | int]


def _scenario(f: Facts, _: Failure | None) -> str:
    """The scenario's explanation is today's catalogue entry's (a name it no longer has is said).
    The catalogue is loaded here, when a scenario's notice is drawn: not for the first frame."""
    from vmmtui.scenarios import SCENARIOS

    name = str(f["name"])
    known = SCENARIOS.get(name)
    explanation = known.explanation if known else "a scenario this version of vmmtui does not know"
    return f"scenario {name}: {explanation}"


def _interrupted(f: Facts, _: Failure | None) -> str:
    step = f"{f['role']} {f['step']}" if f["step"] else f"{f['role']}'s step"
    return f"{step} was interrupted: the worker is stopped, which releases it"


def _cleanup_failed(f: Facts, failure: Failure | None) -> str:
    said = failure_facts(failure) if failure is not None else "failed"
    return f"{f['role']} cleanup: {said}"


def _fd_delta(f: Facts, _: Failure | None) -> str:
    """What receiving did to the consumer's fd table, as /proc showed it: the lesson of legacy
    vs VMM (no fd arrives: the IPC handle is 64 plain bytes), and of pidfd_getfd, where the fd
    appears although no message carried it."""
    head = (
        f"{f['role']} fd table (from /proc): {f['before']} fds before receive, {f['after']} after"
    )
    new = sorted((int(k[3:]), v) for k, v in f.items() if k.startswith("fd.") and k[3:].isdigit())
    if not new:
        return (
            head
            + ": no fd arrived"
            + (": the IPC handle is 64 plain bytes" if f["via"] == "legacy" else "")
        )
    shown = ", ".join(f"fd {fd} → {target}" for fd, target in new)
    how = (
        "appeared, taken with pidfd_getfd: no message carried it"
        if f["via"] == "pidfd"
        else "arrived with SCM_RIGHTS"
    )
    return f"{head}: {shown} {how}"


#: each code's sentence, from the notice's facts and the failure it is about
WORDS: dict[str, Callable[[Facts, Failure | None], str]] = {
    NoticeCode.STALE_DIR_REMOVED: lambda f, _: f"removed stale session directory {f['path']}",
    NoticeCode.SCENARIO: _scenario,
    NoticeCode.IN_BACKGROUND: lambda f, _: (
        f"{f['role']} {f['step']} runs in the background: it retries until its peer is ready "
        "(next steps)"
    ),
    NoticeCode.INTERRUPTED: _interrupted,
    NoticeCode.CLEANUP_FAILED: _cleanup_failed,
    NoticeCode.SHM_STRANGERS: lambda f, _: (
        f"{f['count']} /dev/shm file(s) made during the run and left, never seen held or mapped "
        f"by a followed process: {f['names']}; another program's, or made and closed between "
        "two polls, so not counted as a leak of theirs"
    ),
    NoticeCode.FD_DELTA: _fd_delta,
    NoticeCode.SCENARIO_KILLED: lambda f, _: (
        f"scenario: {f['role']} pid {f['pid']} killed with {f['signal']} {f['when']}"
    ),
    NoticeCode.SCENARIO_EXITED: lambda f, _: (
        f"scenario: {f['role']} pid {f['pid']} exited {f['when']}"
    ),
    NoticeCode.SCENARIO_FROZEN: lambda f, _: (
        f"scenario: {f['role']} pid {f['pid']} stopped with SIGSTOP: its socket stays open, "
        "nothing will arrive"
    ),
}


def text_of(e: Notice) -> str:
    """The notice's sentence (its failure's cause and fix are added where it is drawn:
    ``troubleshooting.with_words``)."""
    if not e.code:
        return e.text
    word = WORDS.get(e.code)
    try:
        if word is not None:
            return word(e.facts, e.failure)
    except (KeyError, TypeError, ValueError):
        pass
    shown = ", ".join(f"{k} {v}" for k, v in sorted(e.facts.items()))
    return e.text or (f"{e.code}: {shown}" if shown else e.code)
