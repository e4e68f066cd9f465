"""The shape of a scenario: plan edits, worker flags, session hooks and the promised outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from vmmtui.plan.config import Mechanism, Transport
from vmmtui.plan.steps import build_plan, kind

if TYPE_CHECKING:
    from vmmtui.backends.probe import DeviceRecord
    from vmmtui.stream.events import Event

ANY = "*"  # any failure (or none) is an honest outcome: the point is to show what really happens
ANY_ERROR = "any error"  # whatever error the driver gives, as long as it fails at the expected step
VERIFIED = "verified"

PlanStep = tuple[str, str]


class Stage(Protocol):
    """What the session lets a hook do: the running workers, the socket, helper processes."""

    socket_path: str

    def env(self) -> dict[str, str]: ...

    def kill(self, role: str, sig: int, when: str) -> list[Event]: ...

    def freeze(self, role: str) -> list[Event]: ...

    def pid(self, role: str) -> int | None:
        """A live worker's pid (None once it has exited)."""

    def quit(self, role: str, when: str) -> list[Event]: ...

    def start_helper(self, name: str, argv: list[str]) -> None:
        """Start a process the session reaps at close; its stdout is read with ``helper_line``."""

    def helper_line(self, name: str, timeout: float) -> dict: ...

    def stop_helper(self, name: str) -> None: ...


class Action(Protocol):
    def run(self, stage: Stage) -> list[Event]: ...


@dataclass(frozen=True)
class Hook:
    """``action`` runs right ``when`` ("before" or "after") the plan step ``(role, step)``."""

    when: str
    role: str
    step: str
    action: Action


# -- plan edits ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunEarly:
    """Move ``steps`` to just before ``before`` (consumer-first)."""

    steps: tuple[PlanStep, ...]
    before: PlanStep

    def apply(self, plan: list[PlanStep]) -> list[PlanStep]:
        rest = [s for s in plan if s not in self.steps]
        at = rest.index(self.before)
        return rest[:at] + list(self.steps) + rest[at:]


@dataclass(frozen=True)
class Drop:
    """Leave ``steps`` out (a dead worker cannot take them)."""

    steps: tuple[PlanStep, ...]

    def apply(self, plan: list[PlanStep]) -> list[PlanStep]:
        return [s for s in plan if s not in self.steps]


@dataclass(frozen=True)
class StopAfter:
    """After ``step``, only ``keep``'s steps remain (the other role is gone)."""

    step: PlanStep
    keep: str

    def apply(self, plan: list[PlanStep]) -> list[PlanStep]:
        stop = plan.index(self.step) + 1
        return plan[:stop] + [s for s in plan[stop:] if kind(s[0]) == self.keep]


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    explanation: str
    #: outcomes that count as "happened as described": VERIFIED, an error code, ANY or ANY_ERROR
    expect: tuple[str, ...] = (VERIFIED,)
    #: the step where the failure is expected (None when the run verifies)
    at: PlanStep | None = None
    #: backend -> why the scenario cannot be shown there
    cannot: dict[str, str] = field(default_factory=dict)
    #: the sharing mechanism the scenario runs with
    mechanism: str = Mechanism.VMM.value
    #: edits applied in order to the normal plan
    edits: tuple[RunEarly | Drop | StopAfter, ...] = ()
    #: behaviours asked of each worker, by role kind (``producer``/``consumer``)
    flags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: what the session does around steps
    hooks: tuple[Hook, ...] = ()
    #: steps sent without waiting for the answer, collected later (a connect that retries meanwhile)
    background: tuple[PlanStep, ...] = ()
    #: the producer's ACK deadline in seconds, where the scenario needs a short one
    ack_timeout: float | None = None
    #: why the scenario cannot be shown on a device, given the capability probe's record of it (or None)
    device_cannot: Callable[[DeviceRecord], str | None] | None = None
    #: how the fd travels (a pidfd scenario runs with --transport pidfd)
    transport: str = Transport.SCM_RIGHTS.value
    #: why the scenario cannot be shown on this host whatever the backend (Yama absent, no namespaces)
    host_cannot: Callable[[], str | None] | None = None

    def plan(self) -> list[PlanStep]:
        """The step order this scenario runs."""
        plan = build_plan(self.mechanism)
        for edit in self.edits:
            plan = edit.apply(plan)
        return plan

    def flags_for(self, role: str) -> list[str]:
        return list(self.flags.get(kind(role), ()))

    def hooks_at(self, when: str, role: str, step: str) -> list[Hook]:
        return [h for h in self.hooks if (h.when, h.role, h.step) == (when, role, step)]

    def host_reason(self) -> str | None:
        """Why this cannot be shown on this host whatever the backend (Yama absent, no namespaces)."""
        return self.host_cannot() if self.host_cannot is not None else None

    def why_not(self, backend: str, device_probe: DeviceRecord | None = None) -> str | None:
        """Why this cannot be shown on ``backend`` (and, where the probe's record is given, on that device)."""
        if backend in self.cannot:
            return self.cannot[backend]
        if why := self.host_reason():
            return why
        if self.device_cannot is not None and device_probe is not None:
            return self.device_cannot(device_probe)
        return None

    def as_expected(self, outcome: str, at: PlanStep | None) -> bool:
        if ANY in self.expect:
            return True
        if ANY_ERROR in self.expect:
            return outcome != VERIFIED and at == self.at
        if outcome not in self.expect:
            return False
        return outcome == VERIFIED or self.at is None or at == self.at
