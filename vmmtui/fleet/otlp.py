"""``--otlp ENDPOINT``: the ledger's shares as OpenTelemetry traces, through the official SDK and
its OTLP/HTTP exporter.

One trace per shared thing: a GPU allocation (create → export → transfer → import → map →
release, in every process) or a shared open file such as a memfd (create → each transfer → each
holder's close). Each step is a span under the root, with the process as attributes (host pid,
command, container), so a collector shows who passed what to whom and how long each held it. A
trace is sent when its last holder lets go; at the end of the run the rest are sent marked
``vmmtui.open = true`` (still held when the agent stopped).
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from vmmtui.fleet.facts import SharingFacts
from vmmtui.fleet.prometheus import MissingLibrary
from vmmtui.model.ledger import Allocation, Holding, Transfer
from vmmtui.model.world import World
from vmmtui.stream.events import Event
from vmmtui.stream.names import shown
from vmmtui.stream.observed import CudaCall, FdCloseCall, ProcessExit
from vmmtui.words.findings import road_words

FINISHING = (FdCloseCall, CudaCall, ProcessExit)


def _sdk() -> Any:
    try:
        from opentelemetry import trace  # noqa: PLC0415 (off the start-up path)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
            OTLPSpanExporter,
        )
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError:
        raise MissingLibrary(
            "--otlp needs the OpenTelemetry SDK and its OTLP exporter: pip install '.[fleet]' in vmmtui's clone"
        ) from None
    return trace, OTLPSpanExporter, Resource, TracerProvider, BatchSpanProcessor


def traces_url(endpoint: str) -> str:
    """An OTLP/HTTP endpoint (``http://collector:4318``) → its traces URL (``…/v1/traces``)."""
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"--otlp {endpoint!r}: expected an http(s):// URL (OTLP over HTTP)")
    return (
        endpoint
        if endpoint.rstrip("/").endswith("/v1/traces")
        else endpoint.rstrip("/") + "/v1/traces"
    )


@dataclass
class SpanPlan:
    """One span to send: times in the kernel's monotonic ns, children by index of ``spans``."""

    name: str
    start: int
    end: int | None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class SharePlan:
    """One trace: a root span and its steps (children of the root)."""

    key: str
    root: SpanPlan
    steps: list[SpanPlan]
    done: bool


def _proc_attrs(facts: SharingFacts, pid: int, prefix: str = "process") -> dict[str, Any]:
    label = facts.label(pid)
    return {
        f"{prefix}.pid": pid,
        f"{prefix}.command": label.comm,
        f"{prefix}.container": label.container,
    }


def _transfer_span(facts: SharingFacts, t: Transfer) -> SpanPlan:
    attrs = {
        "vmmtui.how": t.how,
        "vmmtui.from_fd": t.from_fd,
        "vmmtui.to_fd": t.to_fd,
        "vmmtui.via": shown(road_words(t.how, t.sock, t.pidfd), 120),
        **_proc_attrs(facts, t.from_pid, "vmmtui.from"),
        **_proc_attrs(facts, t.to_pid, "vmmtui.to"),
    }
    return SpanPlan(f"transfer {t.how}", t.sent_at, t.received_at, attrs)


def plan_allocation(facts: SharingFacts, a: Allocation) -> SharePlan:
    files = {f for _, f in a.exported if f}
    steps = [
        SpanPlan(
            "cuMemExportToShareableHandle",
            a.created_at,
            a.created_at,
            {"vmmtui.fd": fd, **_proc_attrs(facts, a.pid)},
        )
        for fd, _ in a.exported
    ]
    steps += [_transfer_span(facts, t) for t in facts.ledger.transfers if t.file in files]
    steps += [
        SpanPlan("import", i.at, i.released_at, {"vmmtui.fd": i.fd, **_proc_attrs(facts, i.pid)})
        for i in a.imports
    ]
    steps += [
        SpanPlan(
            "map", m.at, m.unmapped_at, {"vmmtui.size_bytes": m.size, **_proc_attrs(facts, m.pid)}
        )
        for m in a.mappings
    ]
    ends = [
        a.released_at,
        *(i.released_at for i in a.imports),
        *(m.unmapped_at for m in a.mappings),
    ]
    done = all(x is not None for x in ends) and not any(facts.ledger.holders(f) for f in files)
    root = SpanPlan(
        "allocation",
        a.created_at,
        max((x for x in ends if x is not None), default=None) if done else None,
        {
            "vmmtui.size_bytes": a.size,
            "vmmtui.device": a.device,
            "vmmtui.handle_types": a.handle_types,
            "vmmtui.importers": len({i.pid for i in a.imports}),
            **_proc_attrs(facts, a.pid),
        },
    )
    return SharePlan(f"alloc:{a.pid}:{a.handle:#x}:{a.created_at}", root, steps, done)


def plan_file(facts: SharingFacts, file: str, after: int = -1) -> SharePlan | None:
    """A shared open file that is not a traced allocation (a memfd, a dma-buf…), in its lifetime
    after ``after`` (the kernel reuses a freed ``struct file``, so one key names many files in
    turn: each lifetime, from its first holder to its last close, is its own trace)."""
    ledger = facts.ledger
    held: list[Holding] = [
        h for h in [*ledger.history, *ledger.holders(file)] if h.file == file and h.since > after
    ]
    transfers = [t for t in ledger.transfers if t.file == file and t.sent_at > after]
    if not transfers:
        return None
    start = min([h.since for h in held] + [t.sent_at for t in transfers])
    steps = [_transfer_span(facts, t) for t in transfers]
    steps += [
        SpanPlan(
            f"held ({h.how})",
            h.since,
            h.closed_at,
            {"vmmtui.fd": h.fd, **_proc_attrs(facts, h.pid)},
        )
        for h in held
    ]
    done = not ledger.holders(file)
    end = max((h.closed_at or 0 for h in held), default=start) if done else None
    name = ledger.name(file)
    root = SpanPlan(
        "shared file",
        start,
        end,
        {
            "vmmtui.name": shown(name, 120) if name else "",
            "vmmtui.holders": len({h.pid for h in held}),
        },
    )
    return SharePlan(f"file:{file}:{start}", root, steps, done)


def plans(facts: SharingFacts, after: dict[str, int] | None = None) -> list[SharePlan]:
    """Every share the ledger knows; ``after`` skips the lifetimes of a file already sent."""
    after = after or {}
    out = [plan_allocation(facts, a) for a in facts.allocations() if a.exported or a.imports]
    alloc_files = {f for a in facts.allocations() for _, f in a.exported if f}
    for file in dict.fromkeys(t.file for t in facts.ledger.transfers):
        if file and file not in alloc_files:
            plan = plan_file(facts, file, after.get(file, -1))
            if plan is not None:
                out.append(plan)
    return out


#: seconds the exporter waits at the end for the last spans to leave (a collector that is down
#: must not hold the exit: the SDK retries for 10 s per batch)
CLOSE_WAIT = 3.0


class _SdkLog(logging.Handler):
    """The SDK's log lines (one per failed try, a retry every second): kept, never printed; the
    last one gives the reason of the exporter's one line."""

    def __init__(self) -> None:
        super().__init__()
        self.last = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.last = record.getMessage()


_SDK_LOG = _SdkLog()


def _quiet_sdk() -> None:
    logger = logging.getLogger("opentelemetry")
    if _SDK_LOG not in logger.handlers:
        logger.addHandler(_SDK_LOG)
        logger.propagate = False
    _SDK_LOG.last = ""


def _reason(message: str) -> str:
    """A failed export's cause in a few words, from the SDK's log line."""
    if m := re.search(r"\[Errno -?\d+\] ([^'\")\]]+)", message):
        return m.group(1).strip()
    if m := re.search(r"code: (\d+), reason: (.+)", message):
        return f"HTTP {m.group(1)} {m.group(2)}"
    return shown(message, 160) or "no answer"


class _Counted:
    """The SDK's span exporter, counting the spans it delivered (the SDK only logs a failure)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.delivered = 0

    def export(self, spans: Any) -> Any:
        result = self.inner.export(spans)
        if result.name == "SUCCESS":
            self.delivered += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class OtlpExporter:
    """Feeds the ledger and sends each finished share as one trace to an OTLP/HTTP endpoint."""

    def __init__(self, endpoint: str, service: str = "vmmtui", world: World | None = None) -> None:
        """``world``: the run's, which its session folds (the exporter reads it)."""
        trace, OTLPSpanExporter, Resource, TracerProvider, BatchSpanProcessor = _sdk()
        self._trace = trace
        self.facts = SharingFacts(world=world or World())
        resource = Resource.create({"service.name": service, "host.name": _hostname()})
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.url = traces_url(endpoint)
        _quiet_sdk()
        self.exporter = _Counted(OTLPSpanExporter(endpoint=self.url))
        self.spans = 0
        #: after close: one sentence on the spans that did not reach the endpoint, or ""
        self.problem = ""
        self.processor = BatchSpanProcessor(self.exporter)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("vmmtui")
        self.sent: set[str] = set()
        #: a shared file's key → the end of its last lifetime sent (the kernel reuses the key)
        self.file_sent: dict[str, int] = {}
        #: kernel monotonic ns → Unix epoch ns
        self.offset = time.time_ns() - time.monotonic_ns()

    def feed(self, e: Event) -> None:
        """``e`` of the run's stream, after the world folded it (``TraceSession.through``)."""
        self.facts.feed(e)
        if not isinstance(e, FINISHING):
            return  # only a close, a release or an exit can finish a share
        for plan in plans(self.facts, self.file_sent):
            if plan.done and plan.key not in self.sent:
                self._send(plan, still_open=False)

    def close(self) -> None:
        self.facts.finish()
        now = time.monotonic_ns()
        for plan in plans(self.facts, self.file_sent):
            if plan.key not in self.sent:
                self._send(plan, still_open=not plan.done, now=now)
        # the provider's shutdown sends what is queued; it is given CLOSE_WAIT, then the SDK's
        # retries are stopped (its threads are daemons: an export in flight does not hold the exit)
        ending = threading.Thread(target=self.provider.shutdown, daemon=True)
        ending.start()
        ending.join(CLOSE_WAIT)
        if ending.is_alive():
            self.exporter.inner.shutdown()
        if lost := self.spans - self.exporter.delivered:
            self.problem = (
                f"{lost} of {self.spans} spans not delivered to {self.url} "
                f"({_reason(_SDK_LOG.last)}); is an OTLP/HTTP collector listening there?"
            )

    def _send(self, plan: SharePlan, still_open: bool, now: int | None = None) -> None:
        self.sent.add(plan.key)
        if plan.key.startswith("file:") and plan.root.end is not None:
            self.file_sent[plan.key.split(":")[1]] = plan.root.end
        end_default = now if now is not None else time.monotonic_ns()

        def wall(ns: int | None, floor: int) -> int:
            return max(ns if ns is not None else end_default, floor) + self.offset

        root = plan.root
        self.spans += 1 + len(plan.steps)
        attrs = {**root.attrs, "vmmtui.open": still_open, "vmmtui.key": _short(plan.key)}
        span = self.tracer.start_span(root.name, start_time=wall(root.start, 0), attributes=attrs)
        ctx = self._trace.set_span_in_context(span)
        for step in sorted(plan.steps, key=lambda s: s.start):
            child = self.tracer.start_span(
                step.name,
                context=ctx,
                start_time=wall(step.start, 0),
                attributes={**step.attrs, "vmmtui.open": step.end is None},
            )
            child.end(end_time=wall(step.end, step.start))
        span.end(end_time=wall(root.end, root.start))


def _short(key: str) -> str:
    return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()


def _hostname() -> str:
    import socket  # noqa: PLC0415

    return shown(socket.gethostname(), 64)
