"""``--prometheus HOST:PORT``: the sharing ledger as a ``/metrics`` endpoint, through the official
``prometheus-client`` (its custom-collector pattern: numbers are computed from
:class:`~vmmtui.fleet.facts.SharingFacts` at scrape time, as dcgm-exporter reads DCGM on each
scrape).

Names follow Prometheus' conventions: the ``vmmtui_`` prefix, units in the name (``_bytes``),
``_total`` for counters; labels are bounded (the process as host pid, command name and
container; a refusal's call and reason from a fixed list), never fd numbers or addresses.
"""

from __future__ import annotations

import errno
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from vmmtui.fleet.facts import SharingFacts
from vmmtui.model.findings import Weight
from vmmtui.model.world import World
from vmmtui.stream.events import Event

PROCESS = ["pid", "comm", "container"]


class MissingLibrary(RuntimeError):
    """prometheus-client (or the OpenTelemetry SDK) is not installed: one line with the fix."""


def _client() -> Any:
    try:
        import prometheus_client  # noqa: PLC0415 (off the start-up path)
        from prometheus_client.core import (  # noqa: PLC0415
            CounterMetricFamily,
            GaugeMetricFamily,
        )
    except ImportError:
        raise MissingLibrary(
            "--prometheus needs prometheus-client: pip install '.[fleet]' in vmmtui's clone"
        ) from None
    return prometheus_client, CounterMetricFamily, GaugeMetricFamily


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (all interfaces of localhost only by default: ``127.0.0.1``)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--prometheus {text!r}: expected HOST:PORT with a port in 1..65535")
    return (host.strip("[]") or "127.0.0.1"), int(port)


class LedgerCollector:
    """A prometheus-client collector over :class:`SharingFacts` (read under its lock)."""

    def __init__(self, facts: SharingFacts, lock: threading.Lock) -> None:
        self.facts, self.lock = facts, lock

    def describe(self) -> list:
        return []  # computed at scrape time: no fixed description (an "unchecked" collector)

    def collect(self) -> Iterator[Any]:
        _, Counter, Gauge = _client()
        with self.lock:
            f = self.facts
            per_process = [
                (
                    Counter,
                    "vmmtui_exported_allocations",
                    "GPU allocations exported as shareable handles, by exporter",
                    {p: n for p, (n, _) in f.exported().items()},
                ),
                (
                    Counter,
                    "vmmtui_exported_bytes",
                    "Bytes of GPU allocations exported, by exporter",
                    {p: b for p, (_, b) in f.exported().items()},
                ),
                (
                    Counter,
                    "vmmtui_imported_allocations",
                    "Allocations imported (VMM imports and legacy IPC opens), by importer",
                    {p: n for p, (n, _) in f.imported().items()},
                ),
                (
                    Counter,
                    "vmmtui_imported_bytes",
                    "Bytes of allocations imported, by importer (exporter traced)",
                    {p: b for p, (_, b) in f.imported().items()},
                ),
                (
                    Gauge,
                    "vmmtui_live_importers",
                    "Processes holding an unreleased import of this exporter's memory now",
                    f.live_importers(),
                ),
                (
                    Gauge,
                    "vmmtui_orphaned_import_bytes",
                    "Bytes an importer holds of allocations whose exporter has exited",
                    f.orphaned_bytes(),
                ),
                (
                    Gauge,
                    "vmmtui_pinned_bytes",
                    "Bytes an exporter's exported memory pins now (its own handle or an "
                    "importer's open or mapping keeps it alive), by exporter",
                    dict(f.pinned),
                ),
                (
                    Counter,
                    "vmmtui_received_fds_never_closed",
                    "Received or taken fds of memory (a CUDA export, a memfd, a /dev/shm file, a "
                    "dma-buf, a GPU fd, or a file whose kind was not seen) a process held until it "
                    "exited; sockets and pipes kept so are vmmtui_findings{kind=fd-closed-by-exit}",
                    dict(f.never_closed),
                ),
            ]
            families = []
            for kind, name, doc, values in per_process:
                fam = kind(name, doc, labels=PROCESS)
                for pid, value in sorted(values.items()):
                    fam.add_metric(list(f.label(pid).labels()), value)
                families.append(fam)
            refused = Counter(
                "vmmtui_refused_calls",
                "Refused sharing calls (pidfd_getfd, CUDA imports and exports) by call and reason",
                labels=["call", "reason"],
            )
            for (call, reason), n in sorted(f.refused.items()):
                refused.add_metric([call, reason], n)
            transfers = Counter(
                "vmmtui_fd_transfers",
                "File descriptors moved between processes, by how (SCM_RIGHTS, pidfd_getfd)",
                labels=["how"],
            )
            for how, n in sorted(f.transfers().items()):
                transfers.add_metric([how], n)
            shares = Counter(
                "vmmtui_polled_shares",
                "Open files that polling proved held by two or more processes (kcmp), by kind",
                labels=["kind"],
            )
            for kind, n in sorted(f.polled_shares.items()):
                shares.add_metric([kind], n)
            leaked = Gauge(
                "vmmtui_leaked_files",
                "Shared-memory and socket files left by processes that exited (polling mode)",
                labels=["kind"],
            )
            for kind, n in sorted(f.leaked_files.items()):
                leaked.add_metric([kind], n)
            events = Counter("vmmtui_events", "Events the agent folded", labels=["mode"])
            events.add_metric([f.mode or "none"], f.events)
            lost = Counter("vmmtui_events_lost", "Kernel records lost (ring buffer full)")
            lost.add_metric([], f.lost)
            lost_cpu = Counter(
                "vmmtui_records_lost",
                "Kernel records lost (ring buffer full), by the CPU that lost them (-1: not known)",
                labels=["cpu"],
            )
            for cpu, n in sorted(f.lost_by_cpu().items()):
                lost_cpu.add_metric([str(cpu)], n)
            unknown = Counter(
                "vmmtui_unknown_findings",
                "Conclusions lost records could overturn (a leak whose close, a sender whose send "
                "may be among them), said as unknown instead",
            )
            unknown.add_metric([], f.unknown)
            in_flight = Counter(
                "vmmtui_fds_in_flight",
                "Fds the kernel found still queued when their socket was released (never received)",
            )
            in_flight.add_metric([], f.in_flight)
            found = Counter(
                "vmmtui_findings",
                "Every finding of the run by kind, shares and imports included (the count the "
                "trace's end line and --json say)",
                labels=["kind"],
            )
            for kind, n in sorted(f.findings.items()):
                found.add_metric([kind], n)
            weighed = Counter(
                "vmmtui_findings_by_weight",
                "The same findings by weight: good (shares, imports), problem (the end line's "
                '"to look at"), quiet (facts: a received socket or pipe held until exit)',
                labels=["weight"],
            )
            for w in Weight:
                weighed.add_metric([str(w)], f.weights[w])
            gpu_pinned = Gauge(
                "vmmtui_gpu_pinned_bytes",
                "Bytes a process holds of another's GPU memory now, by GPU, holder, creator and "
                "whether the creator lives (false: orphaned, NVML charges it to an importer)",
                labels=["gpu", "holder", "creator", "creator_alive"],
            )
            for key, n in sorted(f.gpu_pinned().items()):
                gpu_pinned.add_metric(list(key), n)
            gpu_charged = Gauge(
                "vmmtui_gpu_charged_bytes",
                "Bytes NVML (like nvidia-smi) charges a process on a GPU, in its newest reading",
                labels=["gpu", "pid"],
            )
            for (index, charged_pid), n in sorted(f.gpu_charged().items()):
                gpu_charged.add_metric([index, charged_pid], n)
        yield from families
        yield from (gpu_pinned, gpu_charged)
        yield from (refused, transfers, shares, leaked, events, lost, lost_cpu, unknown, in_flight)
        yield found
        yield weighed


@dataclass
class MetricsEndpoint:
    """The ``/metrics`` HTTP endpoint of one agent: ``feed`` events, ``close`` when done."""

    facts: SharingFacts
    host: str
    port: int
    lock: threading.Lock
    server: Any = None
    thread: Any = None

    @classmethod
    def start(cls, listen: str, mode: str = "", world: World | None = None) -> MetricsEndpoint:
        """Bind ``HOST:PORT`` (raises ValueError for bad input, OSError when the port is taken);
        ``mode`` (polling, ebpf) labels the event counter from the first scrape; ``world``: the
        run's, which its session folds (a scrape reads it under its lock, between two events)."""
        host, port = parse_listen(listen)
        client, _, _ = _client()
        registry = client.CollectorRegistry(auto_describe=False)
        facts = SharingFacts(world=world or World(), mode=mode)
        lock = facts.world.lock
        registry.register(LedgerCollector(facts, lock))
        try:
            server, thread = client.start_http_server(port, addr=host, registry=registry)
        except OSError as exc:  # a name that does not resolve, an address of another machine
            if not isinstance(exc, socket.gaierror) and exc.errno != errno.EADDRNOTAVAIL:
                raise  # the port is taken, or privileged: the caller says pick another
            raise ValueError(
                f"--prometheus {listen!r}: {host} is not an address of this machine "
                f"({exc.strerror or exc}); use 127.0.0.1, 0.0.0.0 (every address) or one of its own"
            ) from None
        return cls(facts, host, port, lock, server, thread)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address, bracketed
        return f"http://{host}:{self.server.server_port if self.server else self.port}/metrics"

    def feed(self, e: Event) -> None:
        with self.lock:
            self.facts.feed(e)

    def close(self) -> None:
        with self.lock:
            self.facts.finish()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
