"""OpenTelemetry traces of a message: the WebSocket frame (``ws <type>``), the Celery
publish and run of its lane turn (opentelemetry-instrumentation-celery, which carries the
trace context in the task's headers), the turn (``lane.turn``), and its LLM requests
(``llm.complete``) and tool calls (``tool <name>``). REST requests get Flask's spans
(opentelemetry-instrumentation-flask). docs/operations.md "Traces".

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is
set: then spans go to that collector by OTLP over HTTP, batched, with the exporter's own
``OTEL_*`` settings (headers, timeout) and ``OTEL_SERVICE_NAME``. Off, ``span`` is a
``nullcontext`` and nothing is instrumented: no cost. The provider is this module's own,
never the process-global one, so a test can turn tracing on and off again.

A turn that a wake did not enqueue itself (it was coalesced into one already queued, or
the sweeper found the message) belongs to the trace of whoever enqueued it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

_provider: TracerProvider | None = None
_instrumented: list[Any] = []  # instrumentors to undo in ``disable``


def endpoint() -> str | None:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or \
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None


def configure(service_name: str, *, processor: SpanProcessor | None = None) -> bool:
    """Turn tracing on for this process if an OTLP endpoint is configured, or with
    ``processor`` (tests: an in-memory exporter's); returns whether it is on. Call it
    before ``instrument_celery`` and ``instrument_flask``."""
    global _provider
    if processor is None and endpoint() is None:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(resource=Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or service_name}))
    if processor is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    _provider = provider
    return True


def disable() -> None:
    """Undo ``configure`` and the instrumentation (flushing what was recorded)."""
    global _provider
    while _instrumented:
        _instrumented.pop().uninstrument()
    if _provider is not None:
        _provider.shutdown()
    _provider = None


def enabled() -> bool:
    return _provider is not None


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    """A span around the block (a child of the current one), or nothing when off."""
    if _provider is None:
        yield
        return
    tracer = _provider.get_tracer("vancetope")
    with tracer.start_as_current_span(name, attributes={
            f"vancetope.{k}": v for k, v in attributes.items() if v is not None}):
        yield


def instrument_celery() -> None:
    """Spans for publishing and running Celery tasks, with the context in their headers
    (the producer's span is the task's parent). Once per process; nothing when off."""
    if _provider is None or any(type(i).__name__ == "CeleryInstrumentor"
                                for i in _instrumented):
        return
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()
    instrumentor.instrument(tracer_provider=_provider)
    _instrumented.append(instrumentor)


def instrument_flask(app: Any) -> None:
    """Spans for the gateway's HTTP requests, except the long-lived ``/ws`` upgrade (each
    frame gets its own trace instead) and the probes and scrapes; nothing when off."""
    if _provider is None:
        return
    from opentelemetry.instrumentation.flask import FlaskInstrumentor

    FlaskInstrumentor().instrument_app(app, tracer_provider=_provider,
                                       excluded_urls="/ws,/metrics,/healthz,/readyz")
