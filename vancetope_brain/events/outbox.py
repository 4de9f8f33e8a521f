"""Publishing what committed turns left in the event outbox (ARCHITECTURE §5).

A turn's commit enqueues its chat lines and status change in the store
(``EventOutboxStore``); publishing them is this module's job, done by the lane right
after its commit, by the lane's next turn before anything of its own, and by the beat
sweep for events left longer than ``VANCETOPE_SWEEP_AGE`` (a worker died in between).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import groupby

from vancetope_brain.events.bus import EventBus, Publish
from vancetope_brain.events.model import EventType
from vancetope_brain.models import OutboxEvent
from vancetope_brain.store import EventOutboxStore

FLUSH_PAGE = 500
"""Events read from the store at a time."""
OnPublish = Callable[[str, Sequence[OutboxEvent]], None]
"""(tenant, events): told of published events before their rows are removed, so what it
derives from them (webhook deliveries: ``WebhookEmitter.on_outbox``) is never lost; a
publisher that dies in between calls it again with the same rows (it must be idempotent)."""
EVENTS_PER_SWEEP = 1000
"""Most events one sweep publishes; the rest wait for the next sweep."""


class EventOutbox:
    """Publishes outbox events into their sessions' streams, then removes them.

    Each event reaches its stream once: it is published under its id as dedupe key,
    so a publisher that died after publishing but before removing leaves nothing to
    double. Order: a process's events go out in commit order, and every publisher goes
    through them in that order, so two publishers racing over the same events still
    leave each once and in order. Thread-safe.
    """

    def __init__(self, store: EventOutboxStore, bus: EventBus,
                 on_publish: OnPublish | None = None) -> None:
        self._store = store
        self._bus = bus
        self._on_publish = on_publish

    def flush(self, tenant_id: str, process_id: str, limit: int | None = None, *,
              first: Sequence[OutboxEvent] | None = None) -> int:
        """Publish the process's pending events in order and remove them: all of them, or
        at most ``limit``. ``first``: the first page (``FLUSH_PAGE`` events at most), read
        by the caller (``LaneStore.turn_start``). Returns how many were published (or found
        published)."""
        done = 0
        while limit is None or done < limit:
            page = FLUSH_PAGE if limit is None else min(FLUSH_PAGE, limit - done)
            events = self._store.pending_events(tenant_id, process_id, limit=page) \
                if first is None else first
            first = None
            self.publish(tenant_id, events)
            done += len(events)
            if len(events) < page:
                break
        return done

    def publish(self, tenant_id: str, events: Sequence[OutboxEvent]) -> None:
        """Publish these outbox events of the tenant in their order and remove them: a page
        ``flush`` read, or what a commit just enqueued (``Committed.events``), which its
        committer publishes without reading it back."""
        if not events:
            return
        # One round trip per run of events of one session (a turn's all go to one).
        for (session_id, pid), run in groupby(events, lambda e: (e.session_id, e.process_id)):
            self._bus.publish_many(session_id, pid, [
                Publish(EventType(e.type), e.data, dedupe=e.id) for e in run])
        if self._on_publish is not None:  # before the rows go: a crash here repeats it
            self._on_publish(tenant_id, events)
        self._store.remove_events(tenant_id, [event.id for event in events])

    def sweep(self, older_than: datetime) -> int:
        """The beat job's part: publish the events of every process holding one enqueued
        before ``older_than`` (left by a worker that died after its commit), at most
        ``EVENTS_PER_SWEEP``. Returns how many were published."""
        done = 0
        for tenant_id, process_id in self._store.stale_event_processes(older_than):
            if done >= EVENTS_PER_SWEEP:
                break
            done += self.flush(tenant_id, process_id, limit=EVENTS_PER_SWEEP - done)
        return done
