"""Failure scenarios: seed 000's troubleshooting table made to really happen, one at a time.

A scenario changes what a worker does (skip the rounding, free with the wrong call, keep an fd)
or what the session does around the plan (kill a worker, plant a stale socket, let an intruder
connect first). Nothing is simulated: the error shown is whatever the driver or kernel returned.
Each scenario says which outcome it expects, so ``vmmtui run --scenario NAME`` can tell whether
the failure happened as described and everything was cleaned up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmmtui.steps import CONSUMER, PRODUCER, build_plan

ANY = "*"  # any failure (or none) is an honest outcome: the point is to show what really happens
ANY_ERROR = "any error"  # whatever error the driver gives, as long as it fails at the expected step
VERIFIED = "verified"


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    explanation: str
    #: outcomes that count as "happened as described": VERIFIED, an error code, or ANY
    expect: tuple[str, ...] = (VERIFIED,)
    #: the step where the failure is expected (None when the run verifies)
    at: tuple[str, str] | None = None
    #: backend -> why the scenario cannot be shown there
    cannot: dict[str, str] = field(default_factory=dict)
    #: the sharing mechanism the scenario runs with (vmm, or legacy IPC handles)
    mechanism: str = "vmm"

    def plan(self) -> list[tuple[str, str]]:
        """The step order this scenario runs (most keep the normal plan)."""
        plan = build_plan(self.mechanism)
        if self.name == "consumer-first":
            early = [(CONSUMER, "init"), (CONSUMER, "connect")]
            rest = [s for s in plan if s not in early]
            at = rest.index((PRODUCER, "listen"))
            return rest[:at] + early + rest[at:]
        if self.name == "producer-dies":
            gone = {(PRODUCER, "wait_ack"), (PRODUCER, "cleanup"), (CONSUMER, "ack")}
            return [s for s in plan if s not in gone]
        if self.name in ("consumer-dies", "consumer-hangs"):
            stop = plan.index((CONSUMER, "map")) + 1
            return plan[:stop] + [s for s in plan[stop:] if s[0] == PRODUCER]
        return plan

    def why_not(self, backend: str) -> str | None:
        return self.cannot.get(backend)

    def as_expected(self, outcome: str, at: tuple[str, str] | None) -> bool:
        if ANY in self.expect:
            return True
        if ANY_ERROR in self.expect:
            return outcome != VERIFIED and at == self.at
        if outcome not in self.expect:
            return False
        return outcome == VERIFIED or self.at is None or at == self.at


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario(
        "unaligned-size", "skip the rounding to the granularity: the real cuMemCreate error",
        "cuMemCreate and cuMemMap take sizes that are multiples of the allocation granularity "
        "(cuMemGetAllocationGranularity). This run passes the size unrounded; the driver refuses it "
        "and nothing is allocated.",
        expect=("CUDA_ERROR_INVALID_VALUE",), at=(PRODUCER, "create"),
        cannot={"memfd": "the kernel rounds mmap lengths up to a page by itself, so an unaligned memfd size "
                         "is accepted and there is no error to show"}),
    Scenario(
        "consumer-first", "the consumer connects before the producer listens: refused, retried, then connected",
        "The consumer starts its connect before the socket exists. connect() fails (ENOENT: no socket file "
        "yet; ECONNREFUSED: a file but nobody listening) and is retried until the deadline; once the producer "
        "listens, the next try succeeds. The retries are counted in the connect step."),
    Scenario(
        "stale-socket", "a socket file left by a dead run: detected, removed, explained",
        "Before the producer listens, a real process binds the socket path and is killed, leaving the file "
        "behind as a crashed run would. bind() would fail with EADDRINUSE; the producer first connects to the "
        "file, gets ECONNREFUSED (nobody listening), removes it and binds again."),
    Scenario(
        "wrong-release", "the consumer frees imported memory with cuMemFree instead of cuMemRelease",
        "cuMemFree is for cuMemAlloc memory. On an imported VMM mapping it is the wrong call: the run shows "
        "what the driver really answers (seed 000 saw a segfault), then cleans up the right way "
        "(cuMemUnmap, cuMemAddressFree, cuMemRelease). On memfd the analogue is libc free() on the mapped "
        "address, which kills the worker: the inspector shows the signal and the session cleans up.",
        expect=(ANY,), at=(CONSUMER, "cleanup")),
    Scenario(
        "producer-dies", "the producer is killed right after sending the fd: the consumer still verifies",
        "An allocation lives while any handle or fd refers to it. The producer is SIGKILLed right after "
        "sendmsg; the consumer still imports, maps and verifies through the fd it received, then cleans up. "
        "The producer's ACK and cleanup steps and the consumer's ACK are left out of the plan."),
    Scenario(
        "consumer-dies", "the consumer is killed after mapping: the producer sees the socket close and cleans up",
        "The consumer is SIGKILLed after cuMemMap, before it verifies. The kernel closes its socket, so the "
        "producer's wait for the ACK ends at once with end-of-file (PEER_CLOSED), not by its deadline; "
        "the producer then cleans up. See consumer-hangs for the deadline.",
        expect=("PEER_CLOSED",), at=(PRODUCER, "wait_ack")),
    Scenario(
        "consumer-hangs", "the consumer freezes after mapping: the producer's ACK deadline fires",
        "The consumer is stopped (SIGSTOP) after cuMemMap, so its socket stays open but nothing arrives. "
        "The producer's ACK wait runs into its deadline (3 s in this scenario) with ETIMEDOUT, cleans up, "
        "and the session kills the frozen consumer.",
        expect=("ETIMEDOUT",), at=(PRODUCER, "wait_ack")),
    Scenario(
        "leaked-fd", "the consumer never closes the received fd: flagged at cleanup from /proc",
        "The consumer's cleanup skips close() on the fd that arrived by SCM_RIGHTS. After the step the session "
        "reads /proc/PID/fd and finds the same file still open, and flags the leak with its number and target. "
        "A leaked fd keeps the allocation alive until the process exits.",
        expect=("FD_LEAK",), at=(CONSUMER, "cleanup")),
    Scenario(
        "no-fd-handle-type", "allocate without requestedHandleTypes = POSIX_FILE_DESCRIPTOR: export fails",
        "A handle type must be requested when the allocation is created (seed 004: "
        "CUmemAllocationProp::requestedHandleTypes); without it the allocation cannot be exported as an fd "
        "and cuMemExportToShareableHandle fails.",
        expect=("CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_NOT_PERMITTED", "CUDA_ERROR_NOT_SUPPORTED"),
        at=(PRODUCER, "export"),
        cannot={"memfd": "a memfd is a file descriptor from the start; there is no allocation without an fd "
                         "handle type to export"}),
    Scenario(
        "intruder", "a third process connects first: refused by SO_PEERCRED, gets no fd",
        "Right after the producer listens, another process connects before the consumer. The producer reads "
        "SO_PEERCRED, sees a pid other than the consumer it launched, logs the intruder's pid and uid, closes "
        "that connection and keeps waiting. The intruder reports how many fds it received: none."),
    Scenario(
        "out-of-memory", "ask for more than the free device memory: CUDA_ERROR_OUT_OF_MEMORY",
        "The producer reads the free memory (cuMemGetInfo) and asks cuMemCreate for 1 GiB more than that. "
        "The driver refuses with CUDA_ERROR_OUT_OF_MEMORY and nothing is left allocated.",
        expect=("CUDA_ERROR_OUT_OF_MEMORY",), at=(PRODUCER, "create"),
        cannot={"memfd": "memfd pages are allocated lazily: ftruncate to any size succeeds, and running out "
                         "would mean the kernel's OOM killer, which vmmtui will not provoke"}),
    Scenario(
        "legacy-second-context", "legacy IPC: open the handle again from a second context on the same device",
        "Seed 003: a legacy IPC handle may be opened by one context per device per process. The consumer opens it "
        "in its primary context, opens it there again (the driver only counts the opens and returns the same "
        "pointer), then creates a second context on the same device and opens it from there: the driver refuses.",
        expect=(ANY_ERROR,), at=(CONSUMER, "import"), mechanism="legacy",
        cannot={"memfd": "legacy IPC handles are a CUDA driver feature; memfd has no legacy mode"}),
]}


def get(name: str | None) -> Scenario | None:
    """The scenario called ``name``; None for no scenario; KeyError with the known names otherwise."""
    if name is None:
        return None
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None
