"""Traces (issue 15): one ``process-steer`` frame gives one trace — the frame's span, the
Celery publish of its lane turn, the task's run in the worker (the context crossed in the
task's headers), the turn, its LLM requests and its tool call — recorded by an in-memory
exporter. Off (no endpoint configured), nothing is recorded."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.gateway.wire import wait_process
from vancetope_brain.llm import LlmMessage, LlmResponse, ToolCall, ToolSpec
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus
from vancetope_brain.observability import tracing


def _lists_then_answers(messages: list[LlmMessage], tools: list[ToolSpec]) -> LlmResponse:
    if messages[-1].role == "tool":
        return LlmResponse("", (ToolCall("c2", "respond", json.dumps(
            {"message": "listed.", "awaiting_user_input": False})),))
    return LlmResponse("", (ToolCall("c1", "process_list", json.dumps({})),))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    assert tracing.configure("vancetope-test", processor=SimpleSpanProcessor(exporter))
    tracing.instrument_celery()
    yield exporter
    tracing.disable()


def _by_name(found: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    matching = [s for s in found if s.name == name]
    assert len(matching) == 1, (name, [s.name for s in found])
    return matching[0]


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent else None


def test_one_steer_gives_connected_spans_from_frame_to_llm_and_tool(emb, client, spans):
    created = client.ok("session-create", title="traced")
    pid = created["chatProcessId"]
    wait_process(emb, emb.who, pid, ProcessStatus.IDLE)
    emb.worker.join()
    emb.model = FunctionModel(_lists_then_answers)
    spans.clear()

    client.ok("process-steer", targetThinkProcessId=pid, content="what runs?")
    wait_process(emb, emb.who, pid, ProcessStatus.IDLE)
    emb.worker.join()

    finished = spans.get_finished_spans()
    frame = _by_name(finished, "ws process-steer")
    # The steer's trace: a sweep meanwhile (its own trace) may schedule a turn for when the
    # running turn's lease runs out, which finds nothing to do.
    found = [s for s in finished if s.context.trace_id == frame.context.trace_id]
    publish = _by_name(found, "apply_async/vancetope.lane_shard")
    run = _by_name(found, "run/vancetope.lane_shard")
    turn = _by_name(found, "lane.turn")
    tool = _by_name(found, "tool process_list")
    llm = [s for s in found if s.name == "llm.complete"]
    assert len(llm) == 2  # the tool call, then the answer
    assert frame.parent is None
    assert _parent(publish) == frame.context.span_id
    assert _parent(run) == publish.context.span_id  # across the broker, in the headers
    assert _parent(turn) == run.context.span_id
    assert {_parent(s) for s in (tool, *llm)} == {turn.context.span_id}
    assert frame.attributes is not None and frame.attributes["vancetope.frame"] == \
        "process-steer"
    assert turn.attributes is not None and turn.attributes["vancetope.process_id"] == pid
    assert all(s.attributes is not None and s.attributes["vancetope.model"] == llm[0].attributes
               ["vancetope.model"] for s in llm)


def test_tracing_is_off_without_an_endpoint(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert tracing.configure("vancetope-test") is False
    assert not tracing.enabled()
    with tracing.span("nothing", a=1):
        pass


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that keeps what it was sent."""

    received: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_with_an_endpoint_spans_are_exported_by_otlp_http(monkeypatch):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT",
                           f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "vt-otlp-test")
        assert tracing.configure("vancetope-test")
        with tracing.span("exported-span", frame="ping"):
            pass
        tracing.disable()  # flushes the batch
    finally:
        server.shutdown()
        thread.join(timeout=10)
        server.server_close()
    (path, content_type, body), = _Collector.received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    assert b"exported-span" in body and b"vt-otlp-test" in body
