"""``--otlp``: each share leaves as one OpenTelemetry trace, received by a real OTLP/HTTP endpoint
(a local server decoding the protobuf request as a collector does)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("opentelemetry.sdk", reason="OpenTelemetry SDK not installed (vmmtui[fleet])")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (  # noqa: E402
    ExportTraceServiceRequest,
)

from tests.fleet.test_facts import EXP, IMP, MiB, gpu_share_events, run_of  # noqa: E402
from vmmtui.fleet.otlp import OtlpExporter, traces_url  # noqa: E402
from vmmtui.stream.observed import CudaCall, FdCloseCall  # noqa: E402


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        self.spans: list = []
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                outer.paths.append(self.path)
                for rs in req.resource_spans:
                    for ss in rs.scope_spans:
                        outer.spans.extend(ss.spans)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *a) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.shutdown()
    c.server_close()


def attrs(span) -> dict:
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in span.attributes}


def test_a_finished_allocation_is_one_trace_export_transfer_import_map(collector):
    exporter = OtlpExporter(f"http://127.0.0.1:{collector.server_port}")
    run = run_of(exporter.facts, exporter)
    run.push(*gpu_share_events(exporter_exits=False))
    run.push(CudaCall(IMP, IMP, 9, "cuMemUnmap", 0, ptr=0x7F0000))
    run.push(CudaCall(IMP, IMP, 10, "cuMemRelease", 0, handle=0xB))
    run.push(CudaCall(EXP, EXP, 11, "cuMemRelease", 0, handle=0xA))
    assert not exporter.sent  # the exporter still holds the exported fd 7: the file lives on
    run.push(FdCloseCall(EXP, EXP, 12, 7, "f7", 0))
    assert len(exporter.sent) == 1  # sent as soon as the last holder let go
    exporter.close()
    assert collector.paths == ["/v1/traces"] and exporter.problem == ""
    names = sorted(s.name for s in collector.spans)
    assert names == sorted(
        ["allocation", "cuMemExportToShareableHandle", "transfer SCM_RIGHTS", "import", "map"]
    )
    root = next(s for s in collector.spans if s.name == "allocation")
    assert {s.trace_id for s in collector.spans} == {root.trace_id}
    assert all(s.parent_span_id == root.span_id for s in collector.spans if s is not root)
    assert attrs(root)["vmmtui.size_bytes"] == 2 * MiB
    assert attrs(root)["process.pid"] == EXP and attrs(root)["vmmtui.open"] is False
    transfer = next(s for s in collector.spans if s.name.startswith("transfer"))
    assert attrs(transfer)["vmmtui.from.pid"] == EXP and attrs(transfer)["vmmtui.to.pid"] == IMP


def test_what_is_still_held_at_the_end_is_sent_marked_open(collector):
    exporter = OtlpExporter(f"http://127.0.0.1:{collector.server_port}/")
    run_of(exporter.facts, exporter).push(*gpu_share_events(exporter_exits=False))
    assert not exporter.sent
    exporter.close()
    root = next(s for s in collector.spans if s.name == "allocation")
    assert attrs(root)["vmmtui.open"] is True


def test_an_endpoint_that_is_not_a_url_is_refused():
    with pytest.raises(ValueError, match="http"):
        traces_url("collector:4318")
    assert traces_url("http://c:4318") == "http://c:4318/v1/traces"


def test_nothing_listening_is_one_sentence_at_the_end_and_no_sdk_chatter(capfd):
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exporter = OtlpExporter(f"http://127.0.0.1:{port}")
    run_of(exporter.facts, exporter).push(*gpu_share_events(exporter_exits=False))
    exporter.close()
    assert exporter.problem.startswith(f"5 of 5 spans not delivered to http://127.0.0.1:{port}/")
    assert "(Connection refused)" in exporter.problem
    assert capfd.readouterr().err == ""  # the SDK's retries and failures are not printed
