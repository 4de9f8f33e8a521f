"""Observability: Prometheus metrics (``metrics``), structured logs (``logs``) and
OpenTelemetry traces (``tracing``) — one module per signal (docs/operations.md,
"Observing").

Other modules reach them in one line (``metrics.TURNS.labels(...).inc()``,
``logs.turn_ids(...)``, ``tracing.span(...)``). Like the rest of ``vancetope_brain`` this
package imports no Flask and no Celery; the gateway and the workers mount what it builds
(``metrics.exposition``, ``tracing.instrument_celery`` is handed the Celery app).
"""
