"""Events become deliveries: one per subscription of the event's project that wants it.

Callers: the event outbox's publisher (process done / failed / blocked, read from the
``status-changed`` rows a turn's commit wrote: ``on_outbox``), the Inbox service (an item
created or answered) and schedules (``schedule_run_finished``). A delivery's id is derived
from its subscription and the event's key, so emitting one event again (a publisher that
died before removing its outbox rows, a replayed tool call) adds nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from vancetope_brain.errors import NotFound
from vancetope_brain.models import CloseReason, OutboxEvent, ProcessStatus, utcnow
from vancetope_brain.models.schedule import FINISHED, Schedule, ScheduleRun
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookEvent
from vancetope_brain.store import SessionStore, WebhookStore

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
"""Largest JSON body of a delivery; an event whose data would pass it is sent with its ids
only (``truncated``: true) — the receiver reads the rest over the API."""
STATUS_CHANGED = "status-changed"
_PROCESS_EVENTS = {
    (ProcessStatus.CLOSED.value, CloseReason.DONE.value): WebhookEvent.PROCESS_DONE,
    (ProcessStatus.CLOSED.value, CloseReason.FAILED.value): WebhookEvent.PROCESS_FAILED,
    (ProcessStatus.BLOCKED.value, None): WebhookEvent.PROCESS_BLOCKED,
}
"""(status reached, close reason) → the webhook event it is."""
_IDS = ("processId", "sessionId", "projectId", "itemId", "scheduleId", "runId")


def delivery_id(subscription_id: str, event_key: str) -> str:
    """The ``webhook-id`` of an event's message to one subscription: stable, so a repeated
    emit is the same message."""
    return "msg_" + hashlib.sha256(f"{subscription_id}\n{event_key}".encode()).hexdigest()[:32]


def body_of(event: WebhookEvent, at: datetime, data: dict[str, Any]) -> dict[str, Any]:
    """The JSON body sent (the Standard Webhooks payload shape: type, timestamp, data),
    capped at ``MAX_BODY_BYTES``."""
    body = {"type": event.value, "timestamp": at.isoformat().replace("+00:00", "Z"),
            "data": data}
    if len(json.dumps(body, separators=(",", ":")).encode()) > MAX_BODY_BYTES:
        body["data"] = {**{k: data[k] for k in _IDS if k in data}, "truncated": True}
    return body


class WebhookEmitter:
    """Writes the deliveries of events. Thread-safe; reads the project's subscriptions on
    each emit (events that reach webhooks are rare: ends, blocks, Inbox items)."""

    def __init__(self, store: WebhookStore, processes: SessionStore,
                 clock: Callable[[], datetime] = utcnow) -> None:
        self._store = store
        self._processes = processes
        self._clock = clock

    def emit(self, tenant_id: str, project_id: str | None, event: WebhookEvent, key: str,
             data: dict[str, Any]) -> int:
        """Add the deliveries of one event (``key`` names it uniquely in the tenant) to every
        enabled subscription of the project that wants it; returns how many were new."""
        deliveries = self.deliveries(tenant_id, project_id, event, key, data)
        return self._store.add_deliveries(deliveries) if deliveries else 0

    def deliveries(self, tenant_id: str, project_id: str | None, event: WebhookEvent,
                   key: str, data: dict[str, Any]) -> list[WebhookDelivery]:
        """What ``emit`` would add, for a caller that writes them with its own change
        (``UserInboxStore.save_inbox_item``)."""
        if project_id is None:
            return []
        subscriptions = [s for s in self._store.list_subscriptions(tenant_id, project_id)
                         if s.enabled and event in s.events]
        if not subscriptions:
            return []
        now = self._clock()
        body = body_of(event, now, {**data, "projectId": project_id})
        return [WebhookDelivery(
            id=delivery_id(s.id, key), tenant_id=tenant_id, project_id=project_id,
            subscription_id=s.id, event=event, body=body, next_at=now, created_at=now,
            updated_at=now) for s in subscriptions]

    def on_outbox(self, tenant_id: str, events: Sequence[OutboxEvent]) -> None:
        """The outbox publisher's hook (``EventOutbox``), called before it removes the rows:
        the process events among them become deliveries."""
        for row in events:
            if row.type != STATUS_CHANGED:
                continue
            to, reason = str(row.data.get("to")), row.data.get("reason")
            closed = to == ProcessStatus.CLOSED.value and isinstance(reason, str)
            event = _PROCESS_EVENTS.get((to, reason if closed else None))
            if event is None:
                continue
            try:
                process = self._processes.get_process(tenant_id, row.process_id)
            except NotFound:
                continue
            data = {"processId": process.id, "sessionId": process.session_id,
                    "engine": process.engine, "status": to, "closeReason": reason}
            if event is WebhookEvent.PROCESS_FAILED:
                data["error"] = (process.last_error or "")[:2000]
            self.emit(tenant_id, process.project_id, event, f"outbox:{row.id}", data)

    def schedule_run_finished(self, run: ScheduleRun, schedule: Schedule | None) -> int:
        """A schedule's run recorded its outcome (``ScheduleService.on_run_ended``): a
        finished one (DONE, FAILED, STOPPED, STALE; not BLOCKED, which may still end)
        becomes ``schedule.run.finished``, keyed by the run's id. A run whose schedule was
        deleted has no project to tell."""
        if schedule is None or run.status not in FINISHED:
            return 0
        data = {"scheduleId": schedule.id, "scheduleName": schedule.name, "runId": run.id,
                "tick": run.tick.isoformat().replace("+00:00", "Z"),
                "outcome": run.status.value, "recipe": schedule.recipe,
                "processId": run.process_id, "sessionId": run.session_id}
        return self.emit(run.tenant_id, schedule.project_id,
                         WebhookEvent.SCHEDULE_RUN_FINISHED, f"schedule-run:{run.id}", data)
