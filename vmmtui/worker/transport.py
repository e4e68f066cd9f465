"""How the exported fd reaches a consumer: in the message (SCM_RIGHTS), or taken by the consumer.

With ``pidfd`` the producer sends only its pid and the fd's number, as PyTorch's expandable segments
do; the consumer opens a pidfd of that pid (checked against SO_PEERCRED first: a pid from the wire
is not trusted) and copies the fd out of the producer's table with pidfd_getfd. The fd appears in
the consumer's table although no message carried it. The scenarios' refusals (seccomp, Yama, another
PID namespace) are made here, by the worker itself, with the real calls.
"""

from __future__ import annotations

import os
import select
from typing import TYPE_CHECKING, Any

from vmmtui.backends import pidfd
from vmmtui.plan.config import Transport
from vmmtui.plan.steps import PRODUCER
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.state import HeldKind
from vmmtui.stream.values import AllocMessage

if TYPE_CHECKING:
    from vmmtui.worker.core import Worker

#: worker flags this module reads (a scenario asks for them)
SECCOMP_FLAG = "seccomp-deny-pidfd-getfd"
NO_PTRACER_FLAG = "no-ptracer"
PIDNS_FLAG = "take-from-new-pidns"
UNPRIVILEGED_FLAG = "no-effective-cap-sys-ptrace"


def takes_fd(w: Worker) -> bool:
    """Whether this worker's fds go by pidfd_getfd rather than in the message."""
    return w.cfg.transport == Transport.PIDFD and w.sharing.want_fds > 0


def wants(w: Worker) -> str:
    """What the consumer's recvmsg waits for, as its call log shows it."""
    if takes_fd(w):
        return "metadata naming a pid and an fd number (no fd: it is taken after)"
    return w.sharing.wants


def prepare(w: Worker) -> None:
    """At init: a consumer asked to run like a container under Docker's default profile confines itself;
    one asked to meet Yama as an unprivileged program drops an effective CAP_SYS_PTRACE."""
    if UNPRIVILEGED_FLAG in w.flags:
        dropped = w.calls.timed(
            "capset",
            {"effective": "- CAP_SYS_PTRACE", "permitted": "unchanged"},
            pidfd.drop_effective_cap_sys_ptrace,
            lambda d: "dropped" if d else "not held: nothing to drop",
        )
        if dropped:
            w.say(
                "SCENARIO: dropped CAP_SYS_PTRACE from the effective set, as an unprivileged "
                "program runs (Yama lets that capability through)"
            )
    if SECCOMP_FLAG not in w.flags:
        return
    length = w.calls.timed(
        "prctl(PR_SET_NO_NEW_PRIVS) + prctl(PR_SET_SECCOMP)",
        {"filter": "pidfd_getfd → EPERM, all else allowed"},
        pidfd.deny_pidfd_getfd,
        lambda n: f"{n} BPF instructions installed",
    )
    mode, filters = pidfd.seccomp_mode()
    w.say(
        f"SCENARIO: installed a seccomp filter ({length} instructions) that answers pidfd_getfd with "
        f"EPERM, as Docker's default profile does without CAP_SYS_PTRACE (Seccomp: {mode}, "
        f"{filters} filter(s) in /proc/self/status)"
    )


def offer(
    w: Worker, message: AllocMessage, fds: list[int], shown: dict[str, Any], line: str, peer: str
) -> tuple[list[int], dict[str, Any], str]:
    """The producer's side: with pidfd the message names the fd instead of carrying it."""
    message.transport = w.cfg.transport
    if not (w.cfg.transport == Transport.PIDFD and fds):
        return fds, shown, line
    fd = fds[0]
    message.pid, message.fd = os.getpid(), fd
    consumer = w.state.peers.get(peer)
    if NO_PTRACER_FLAG in w.flags:
        w.say("SCENARIO: not naming the consumer with PR_SET_PTRACER (Yama may refuse it)")
    elif consumer is not None:
        # under Yama ptrace_scope 1 only an ancestor may take our fds; the consumer is a sibling
        result = w.calls.timed(
            "prctl(PR_SET_PTRACER)",
            {"pid": consumer.pid},
            lambda: pidfd.allow_ptracer(consumer.pid),
            lambda r: r if r != "EINVAL" else "EINVAL (no Yama here: nothing to allow)",
        )
        if result == "0":
            w.say(f"Allowed pid {consumer.pid} to take our fds (PR_SET_PTRACER, for Yama)")
    return (
        [],
        {"SCM_RIGHTS": "none", "bytes": f"metadata + pid {message.pid} + fd number {fd}"},
        f"Sent our pid {message.pid} and fd number {fd} to {peer}: no fd in the message",
    )


def take(w: Worker, meta: AllocMessage) -> int:
    """The consumer's side: pidfd_open + pidfd_getfd of the fd the producer named; the new fd, declared."""
    producer = w.state.peers.get(PRODUCER)
    if meta.pid <= 0 or meta.fd < 0:
        raise StepError(
            failure("BAD_MESSAGE", "recvmsg", f"pid {meta.pid} / fd {meta.fd} cannot name an fd")
        )
    if producer is None or meta.pid != producer.pid:
        raise StepError(
            failure(
                "PEER_REFUSED",
                "pidfd_open",
                f"the message names pid {meta.pid}, but SO_PEERCRED says the producer is pid "
                f"{producer.pid if producer else '(none)'}: no fd is taken from another process",
            )
        )
    if PIDNS_FLAG in w.flags:
        _take_from_new_pidns(w, meta)
    handle = w.calls.timed(
        "pidfd_open", {"pid": meta.pid}, lambda: _call(pidfd.pidfd_open, meta.pid), _fd_result
    )
    w.book.hold(handle, HeldKind.PIDFD, f"pidfd of producer pid {meta.pid}")
    try:
        if w.sock is not None and _hung_up(w.sock.fileno()):
            # the producer is gone, so its pid may name another process by now: take nothing
            raise StepError(
                failure(
                    "PEER_CLOSED",
                    "pidfd_open",
                    f"the producer closed its socket (it exited): pid {meta.pid} may name another "
                    "process now; nothing taken",
                )
            )
        got = w.calls.timed(
            "pidfd_getfd",
            {"pidfd": handle, "targetfd": meta.fd, "flags": 0},
            lambda: _getfd(handle, meta.fd),
            _fd_result,
        )
    finally:
        w.book.close_fd(handle, "pidfd")
    w.book.hold(
        got, HeldKind.RECEIVED, f"taken with pidfd_getfd: producer pid {meta.pid} fd {meta.fd}"
    )
    w.say(f"Took fd {meta.fd} of pid {meta.pid} with pidfd_getfd: it is fd {got} here")
    return got


def _hung_up(fd: int) -> bool:
    """Whether the socket's peer has closed its end, without reading (POLLRDHUP/POLLHUP)."""
    rdhup = getattr(select, "POLLRDHUP", 0x2000)
    poller = select.poll()
    poller.register(fd, select.POLLIN | rdhup)
    return any(ev & (rdhup | select.POLLHUP) for _, ev in poller.poll(0))


def _fd_result(fd: int) -> str:
    return f"fd {fd}"


def _call(fn, *args):
    try:
        return fn(*args)
    except pidfd.SyscallError as exc:
        raise StepError(failure(exc.code, fn.__name__, exc.strerror or exc.code)) from None


def _getfd(handle: int, fd: int) -> int:
    try:
        return pidfd.pidfd_getfd(handle, fd)
    except pidfd.SyscallError as exc:
        raise StepError(failure(exc.code, _who_refused(exc.code), _why(exc))) from None


def _who_refused(code: str) -> str:
    """The call as the failure tables key it: a refusal under seccomp or Yama has its own cause and fix."""
    if code != "EPERM":
        return "pidfd_getfd"
    if pidfd.seccomp_mode()[0] == 2:
        return "pidfd_getfd (seccomp)"
    if pidfd.yama_blocks_siblings():
        return "pidfd_getfd (Yama)"
    return "pidfd_getfd"


def _why(exc: pidfd.SyscallError) -> str:
    mode, filters = pidfd.seccomp_mode()
    scope = pidfd.ptrace_scope()
    return (
        f"{exc.strerror}; here: Seccomp {mode} ({filters} filter(s)), Yama ptrace_scope "
        f"{'absent' if scope is None else scope}, CAP_SYS_PTRACE "
        f"{'yes' if pidfd.has_cap_sys_ptrace() else 'no'}"
    )


def _take_from_new_pidns(w: Worker, meta: AllocMessage) -> None:
    """The pidns scenario: the pid is opened from a new PID namespace, where it names nobody (or another)."""
    got = w.calls.timed(
        "pidfd_open (from a new PID namespace)",
        {"pid": meta.pid},
        lambda: pidfd.open_from_new_pidns(meta.pid),
        lambda r: r.get("errno") or r.get("names") or f"unshare {r.get('unshare')}",
    )
    if got.get("unshare") != "0":
        raise StepError(
            failure("UNAVAILABLE", "unshare(CLONE_NEWPID)", f"refused here: {got.get('unshare')}")
        )
    where = f"in a new PID namespace (there the taking process is pid {got.get('my_pid')})"
    w.say(f"SCENARIO: opening pid {meta.pid} {where}")
    if got.get("errno"):
        raise StepError(
            failure(
                got["errno"],
                "pidfd_open (other PID namespace)",
                f"pid {meta.pid} names nobody {where}",
            )
        )
    raise StepError(
        failure(
            "PIDFD_WRONG_PROCESS",
            "pidfd_open (other PID namespace)",
            f"pid {meta.pid} names {got.get('names')} {where}, not the producer",
        )
    )
