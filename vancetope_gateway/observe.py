"""The gateway's ``GET /metrics`` (docs/operations.md "Metrics"): this gateway's samples
(every gunicorn worker's, in multiprocess mode) and the cluster gauges.

No tenant data is in it (``vancetope_brain.observability.metrics``), so it needs no user
token; with ``VANCETOPE_METRICS_TOKEN`` set it asks for that one as a bearer token, for
gateways whose load balancer does not keep ``/metrics`` to the cluster network.
"""

from __future__ import annotations

import hmac

from flask import Flask, Response, request

from vancetope_brain.observability import metrics
from vancetope_gateway.parts import Gateway
from workers.celery_app import lane_queue


def add_metrics_route(app: Flask, gateway: Gateway) -> None:
    config = gateway.config
    cluster = metrics.ClusterCollector.on(
        gateway.store, config.broker_url, [lane_queue(i) for i in range(config.lane_shards)],
        gateway.redis)

    @app.get("/metrics")
    def _metrics() -> Response:
        token = config.metrics_token
        if token is not None and not hmac.compare_digest(
                request.headers.get("Authorization", ""), f"Bearer {token}"):
            return Response("metrics need the bearer token VANCETOPE_METRICS_TOKEN\n", 401,
                            {"WWW-Authenticate": "Bearer"}, mimetype="text/plain")
        body, content_type = metrics.exposition(cluster)
        return Response(body, content_type=content_type)
