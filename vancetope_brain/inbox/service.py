"""The Inbox service (user-interaction.txt §5–§10): create, answer, dismiss, archive,
delegate, revoke, list — and the routing of answers back to the process that asked.

Every change is a compare-and-set on the item's ``revision`` (``UserInboxStore.save_inbox_item``);
the steer message that carries an answer to its process is written in the same atomic
save, so an answered item always reaches its process and a lost race writes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from vancetope_brain.errors import Conflict, InvalidInput, LimitExceeded, NotFound, StoreError
from vancetope_brain.identity import Principal
from vancetope_brain.inbox.attachments import AttachmentStore
from vancetope_brain.inbox.payloads import default_answer, validate_answer, validate_payload
from vancetope_brain.models import InboxAnswer, InboxMessage, ProcessEvent, new_id, utcnow
from vancetope_brain.models.inbox import (
    AUTO_DEFAULT_ANSWERER,
    AnswerPayload,
    Criticality,
    HistoryAction,
    HistoryEntry,
    InboxItem,
    InboxQuery,
    ItemStatus,
    NewItem,
    Outcome,
    ResolvedBy,
)
from vancetope_brain.models.steer import ProcessEventType, SteerMessage
from vancetope_brain.models.webhooks import WebhookDelivery, WebhookEvent
from vancetope_brain.notifications import NotifyEvent, item_link
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import IdentityStore, SessionStore, UserInboxStore
from vancetope_brain.webhooks import WebhookEmitter

log = logging.getLogger(__name__)

MAX_TITLE = 200
MAX_BODY = 100_000
MAX_TAGS = 20
MAX_TAG = 64
_SAVE_ATTEMPTS = 5


class Notifier(Protocol):
    def notify(self, event: NotifyEvent) -> None: ...


Publish = Callable[[str, str, str, dict[str, Any]], None]
"""(tenant, user, event type, item view): push to the user's connections (their feed)."""


@dataclass
class InboxService:
    """The one place inbox items change. ``wake(tenant, process)`` starts a lane;
    ``base_url`` is where notification links point; ``max_pending_per_process``: PENDING
    items one process may have posted (one more is refused, a repeated idempotency key of a
    PENDING one is not)."""

    store: UserInboxStore
    identity: IdentityStore
    processes: SessionStore
    settings: SettingsService
    notifier: Notifier
    publish: Publish
    wake: Callable[[str, str], object]
    attachments: AttachmentStore
    base_url: str
    clock: Callable[[], datetime] = utcnow
    max_pending_per_process: int = 100
    webhooks: WebhookEmitter | None = None
    """Where created and answered items become webhook deliveries (None: nowhere)."""

    # ── creation (engines, the inbox_post tool) ───────────────────────────
    def create(self, tenant_id: str, originator_user_id: str, new: NewItem, *,
               origin_process_id: str | None = None,
               origin_session_id: str | None = None) -> tuple[InboxItem, bool]:
        """Validate and store an item; returns it and whether it is new (a repeated
        (originProcessId, idempotencyKey) returns the first item and creates nothing).

        A LOW ask with a default is answered with it at once (AUTO_DEFAULT, no
        notification: only an ``inbox-item-updated`` push to the assignee's open clients);
        everything else notifies its assignee.
        """
        assignee = new.assigned_to or originator_user_id
        self._check_user(tenant_id, assignee)
        payload = validate_payload(new.type, new.payload or {})
        if "attachmentId" in payload:
            try:
                self.attachments.meta(tenant_id, payload["attachmentId"])
            except NotFound:
                raise InvalidInput(f"no attachment {payload['attachmentId']!r} in this tenant; "
                                   f"store the file first (attach)") from None
        if origin_process_id is not None:
            self._check_pending_cap(tenant_id, origin_process_id, new.idempotency_key)
        now = self.clock()
        item = InboxItem(
            id=new_id("item"), tenant_id=tenant_id, originator_user_id=originator_user_id,
            assigned_to_user_id=assignee, origin_process_id=origin_process_id,
            origin_session_id=origin_session_id, idempotency_key=new.idempotency_key,
            type=new.type, criticality=new.criticality, tags=_tags(new.tags),
            title=_text("title", new.title, MAX_TITLE, required=True) or "",
            body=_text("body", new.body, MAX_BODY), payload=payload,
            requires_action=new.type.is_ask, created_at=now, updated_at=now,
            history=[HistoryEntry(action=HistoryAction.CREATE, by=originator_user_id, at=now,
                                  to_user=assignee)])
        default = default_answer(new.type, payload) if new.type.is_ask else None
        auto = new.criticality is Criticality.LOW and default is not None
        if auto:
            item = item.model_copy(update={
                "status": ItemStatus.ANSWERED, "resolved_by": ResolvedBy.AUTO_DEFAULT,
                "resolved_at": now,
                "answer": AnswerPayload(outcome=Outcome.DECIDED, value=default,
                                        answered_by=AUTO_DEFAULT_ANSWERER),
                "history": [*item.history, HistoryEntry(action=HistoryAction.AUTO_ANSWER,
                                                        by=AUTO_DEFAULT_ANSWERER, at=now)]})
        stored, created = self.store.create_inbox_item(item)
        # Also when not new: a repeated create (a replayed tool call) emits what a crash
        # after the first may have cut off; a delivery's id makes a second emit a no-op.
        self._emit(stored, WebhookEvent.INBOX_ITEM_CREATED)
        if stored.status is ItemStatus.ANSWERED:
            self._emit(stored, WebhookEvent.INBOX_ITEM_ANSWERED)
        if created and auto:  # nobody is bothered, but open clients show it answered
            self._push(stored, "inbox-item-updated")
        elif created:
            self._notify(stored, assignee)
        return stored, created

    def _check_pending_cap(self, tenant_id: str, process_id: str,
                           idempotency_key: str | None) -> None:
        cap = self.max_pending_per_process
        pending = self.store.list_inbox_items(tenant_id, InboxQuery(
            origin_process_id=process_id, statuses=frozenset({ItemStatus.PENDING}), limit=cap))
        if len(pending) >= cap and (idempotency_key is None or all(
                i.idempotency_key != idempotency_key for i in pending)):
            raise LimitExceeded(f"this process has {cap} PENDING Inbox items, the most it may "
                                f"have; wait for answers or dismiss some first")

    def attach(self, tenant_id: str, data: bytes, filename: str, mime_type: str, *,
               key: str | None = None) -> dict[str, Any]:
        """Store a file for an OUTPUT_IMAGE / OUTPUT_DOCUMENT payload (``attachmentId``);
        returns ``{id, filename, mimeType, sizeBytes}``. The same ``key`` again stores
        nothing new (``AttachmentStore.put``)."""
        return self.attachments.put(tenant_id, data, filename, mime_type, key=key)

    def attachment(self, tenant_id: str, attachment_id: str) -> dict[str, Any]:
        """A stored file's ``{id, filename, mimeType, sizeBytes}``; NotFound outside the
        tenant."""
        return self.attachments.meta(tenant_id, attachment_id)

    # ── the user's actions (protocol) ────────────────────────────────────
    def answer(self, who: Principal, item_id: str, outcome: Outcome, *,
               value: Any = None, reason: str | None = None) -> InboxItem:
        """Answer an ask assigned to the caller. DECIDED needs a ``value`` valid for the
        item; INSUFFICIENT_INFO / UNDECIDABLE need a ``reason``."""
        if outcome is Outcome.DECIDED:
            if reason is not None:
                raise InvalidInput("a DECIDED answer has a value, not a reason")
        elif not (reason or "").strip() or value is not None:
            raise InvalidInput(f"an {outcome.value} answer needs a reason (and no value)")

        def change(item: InboxItem, now: datetime) -> dict[str, Any]:
            _require(item, ItemStatus.PENDING, "answered")
            if not item.requires_action:
                raise InvalidInput(f"{item.type.value} items take no answer; dismiss or "
                                   f"archive them")
            checked = validate_answer(item.type, item.payload, value) \
                if outcome is Outcome.DECIDED else None
            return {"status": ItemStatus.ANSWERED, "resolved_by": ResolvedBy.USER,
                    "resolved_at": now,
                    "resolver_reason": None if reason is None else f"{outcome.value}: {reason}",
                    "answer": AnswerPayload(outcome=outcome, value=checked, reason=reason,
                                            answered_by=who.user_id)}

        # Its webhook deliveries are written with the answer, in one save.
        return self._change(who, item_id, HistoryAction.ANSWER, change,
                            webhook=WebhookEvent.INBOX_ITEM_ANSWERED)

    def _webhook_deliveries(self, item: InboxItem,
                            event: WebhookEvent) -> list[WebhookDelivery]:
        """The webhook deliveries of ``event`` on ``item`` (none without subscriptions)."""
        if self.webhooks is None:
            return []
        return self.webhooks.deliveries(*self._webhook_event(item, event))

    def _emit(self, item: InboxItem, event: WebhookEvent) -> None:
        """Write the deliveries of ``event`` on a stored item (after its write: a create,
        which a crash in between repeats with its idempotency key)."""
        if self.webhooks is None:
            return
        try:
            self.webhooks.emit(*self._webhook_event(item, event))
        except StoreError:  # the item stands; only its webhook is lost
            log.warning("the %s webhook deliveries of item %s were not written", event.value,
                        item.id, exc_info=True)

    def _webhook_event(self, item: InboxItem, event: WebhookEvent) -> tuple[
            str, str | None, WebhookEvent, str, dict[str, Any]]:
        """(tenant, project, event, key, data) of ``event`` on ``item``."""
        data: dict[str, Any] = {
            "itemId": item.id, "itemType": item.type.value, "status": item.status.value,
            "criticality": item.criticality.value, "title": item.title,
            "assignedTo": item.assigned_to_user_id, "processId": item.origin_process_id,
            "sessionId": item.origin_session_id}
        if item.answer is not None:
            data["answer"] = item.answer.dump()
        return item.tenant_id, self._project_of(item), event, f"{event.value}:{item.id}", data

    def dismiss(self, who: Principal, item_id: str, note: str | None = None) -> InboxItem:
        """Click an item away unanswered; an ask's process gets a skip answer."""
        def change(item: InboxItem, now: datetime) -> dict[str, Any]:
            _require(item, ItemStatus.PENDING, "dismissed")
            return {"status": ItemStatus.DISMISSED, "resolved_by": ResolvedBy.DISMISSED,
                    "resolved_at": now}

        return self._change(who, item_id, HistoryAction.DISMISS, change, note=note)

    def archive(self, who: Principal, item_id: str) -> InboxItem:
        """Move an ANSWERED or DISMISSED item to the archive (kept for audit)."""
        def change(item: InboxItem, now: datetime) -> dict[str, Any]:
            if item.status not in _ARCHIVABLE:
                raise Conflict(f"item {item.id!r} is {item.status.value}; only ANSWERED or "
                               f"DISMISSED items can be archived (answer or dismiss it first)")
            return {"status": ItemStatus.ARCHIVED, "archived_at": now}

        return self._change(who, item_id, HistoryAction.ARCHIVE, change)

    def delegate(self, who: Principal, item_id: str, to_user_id: str,
                 note: str | None = None) -> InboxItem:
        """Hand a PENDING item to another user of the same tenant, who is notified."""
        def change(item: InboxItem, now: datetime) -> dict[str, Any]:
            _require(item, ItemStatus.PENDING, "delegated")
            self._check_user(who.tenant_id, to_user_id)
            if to_user_id == item.assigned_to_user_id:
                raise InvalidInput(f"the item is already assigned to {to_user_id!r}")
            return {"assigned_to_user_id": to_user_id}

        item = self._change(who, item_id, HistoryAction.DELEGATE, change, note=note,
                            to_user=to_user_id)
        self._notify(item, to_user_id)
        return item

    def revoke_auto_answer(self, who: Principal, item_id: str) -> InboxItem:
        """Take back a LOW item's automatic default: the item is PENDING again and its process
        is told to wait for the user (it goes BLOCKED at the end of its next turn)."""
        def change(item: InboxItem, now: datetime) -> dict[str, Any]:
            if item.resolved_by is not ResolvedBy.AUTO_DEFAULT or \
                    item.status is not ItemStatus.ANSWERED:
                raise Conflict(f"item {item.id!r} was not answered automatically "
                               f"(status {item.status.value}); there is nothing to revoke")
            return {"status": ItemStatus.PENDING, "answer": None, "resolved_by": None,
                    "resolved_at": None, "resolver_reason": None}

        item = self._change(who, item_id, HistoryAction.REVOKE, change)
        self._notify(item, item.assigned_to_user_id)
        return item

    # ── reading ──────────────────────────────────────────────────────────
    def get(self, who: Principal, item_id: str) -> InboxItem:
        """An item assigned to the caller or created by them; anything else looks missing."""
        return self._visible(who, item_id)

    def list(self, who: Principal, *, statuses: Iterable[ItemStatus] | None = None,
             criticalities: Iterable[Criticality] | None = None, tags: Iterable[str] = (),
             session_id: str | None = None, before: tuple[datetime, str] | None = None,
             limit: int = 50) -> list[InboxItem]:
        """The caller's items (assigned to them), newest first. Without ``statuses``:
        everything but ARCHIVED (the archive is a filter of its own)."""
        wanted = frozenset(statuses) if statuses is not None else \
            frozenset(ItemStatus) - {ItemStatus.ARCHIVED}
        return self.store.list_inbox_items(who.tenant_id, InboxQuery(
            assigned_to=who.user_id, statuses=wanted,
            criticalities=frozenset(criticalities) if criticalities is not None else None,
            tags=tuple(tags), origin_session_id=session_id, before=before, limit=limit))

    def pending_summary(self, who: Principal) -> dict[str, Any]:
        """The ``inbox-pending-summary`` data (§12.5)."""
        counts, oldest = self.store.inbox_pending_counts(who.tenant_id, who.user_id)
        return {"totalPending": sum(counts.values()),
                "byCriticality": {c.value: counts.get(c.value, 0) for c in Criticality},
                "oldestPendingAt": oldest.isoformat() if oldest else None}

    def view(self, item: InboxItem) -> dict[str, Any]:
        """The item as clients see it: attachments as short-lived signed URLs."""
        data = item.dump()
        attachment = item.payload.get("attachmentId")
        if attachment:
            data["payload"] = {**data["payload"],
                               "url": self.attachments.signed_url(item.tenant_id, attachment)}
        return data

    # ── housekeeping (beat) ──────────────────────────────────────────────
    def auto_archive(self) -> int:
        """Archive ANSWERED and DISMISSED items older than their assignee's
        ``inbox.autoArchiveAfterDays``; PENDING items stay. Returns how many."""
        done = 0
        now = self.clock()
        for tenant in self.identity.list_tenants():
            for user in self.identity.list_users(tenant.id):
                days = self.settings.resolve(tenant.id, None, user.id,
                                              "inbox.autoArchiveAfterDays")
                query = InboxQuery(assigned_to=user.id, statuses=_ARCHIVABLE, limit=500,
                                   resolved_before=now - timedelta(days=days))
                for item in self.store.list_inbox_items(tenant.id, query):
                    done += self._archive_quietly(item)
        return done

    # ── internals ────────────────────────────────────────────────────────
    def _archive_quietly(self, item: InboxItem) -> int:
        now = self.clock()
        entry = HistoryEntry(action=HistoryAction.ARCHIVE, by="system:auto-archive", at=now)
        changed = item.model_copy(update={
            "status": ItemStatus.ARCHIVED, "archived_at": now, "updated_at": now,
            "history": [*item.history, entry]})
        try:
            saved = self.store.save_inbox_item(changed, expected_revision=item.revision)
        except Conflict:
            return 0  # changed meanwhile; the next run looks again
        self._push(saved, "inbox-item-updated")
        return 1

    def _change(self, who: Principal, item_id: str, action: HistoryAction,
                change: Callable[[InboxItem, datetime], dict[str, Any]], *,
                note: str | None = None, to_user: str | None = None,
                webhook: WebhookEvent | None = None) -> InboxItem:
        """Read, check and apply a change as one compare-and-set, retried on a lost race."""
        for _ in range(_SAVE_ATTEMPTS):
            item = self._assigned(who, item_id)
            now = self.clock()
            update = change(item, now)
            entry = HistoryEntry(action=action, by=who.user_id, at=now, note=note,
                                 from_user=item.assigned_to_user_id if to_user else None,
                                 to_user=to_user)
            changed = item.model_copy(update={**update, "updated_at": now,
                                              "history": [*item.history, entry]})
            message = self._route(changed, action)
            deliveries = [] if webhook is None else self._webhook_deliveries(changed, webhook)
            try:
                saved = self.store.save_inbox_item(changed, expected_revision=item.revision,
                                                    message=message, deliveries=deliveries)
            except Conflict:
                continue
            if message is not None:
                self.wake(saved.tenant_id, message.target_process_id)
            self._push(saved, "inbox-item-updated", also=item.assigned_to_user_id)
            return saved
        raise Conflict(f"item {item_id!r} keeps changing; try again")

    def _route(self, item: InboxItem, action: HistoryAction) -> InboxMessage | None:
        """The steer message an answer, dismissal or revocation sends (§10.2), if any.

        DECIDED and dismissals go to the process that asked. INSUFFICIENT_INFO and
        UNDECIDABLE leave it BLOCKED and reach its parent as an event; a process
        without a parent gets the answer itself, to escalate as it can.
        """
        origin = item.origin_process_id
        if origin is None or not item.requires_action or action not in _ROUTED:
            return None
        target, sender, message = origin, None, self._steer_for(item, action)
        if action is HistoryAction.ANSWER and item.answer is not None and \
                item.answer.outcome is not Outcome.DECIDED:
            process = self.processes.get_process(item.tenant_id, origin)
            if process.parent_process_id is not None:
                target, sender = process.parent_process_id, origin
                message = ProcessEvent(
                    source_process_id=origin, source_name=process.name,
                    type=ProcessEventType.BLOCKED,
                    human_summary=(f"{process.name} stays blocked: the user answered inbox "
                                   f"item {item.title!r} with {item.answer.outcome.value}: "
                                   f"{item.answer.reason}"),
                    payload={"itemId": item.id, "outcome": item.answer.outcome.value,
                             "reason": item.answer.reason})
        return InboxMessage(id=new_id("msg"), tenant_id=item.tenant_id,
                            target_process_id=target, sender_process_id=sender,
                            idempotency_key=f"inbox:{item.id}:{item.revision + 1}",
                            message=message)

    @staticmethod
    def _steer_for(item: InboxItem, action: HistoryAction) -> SteerMessage:
        if action is HistoryAction.REVOKE:
            return ProcessEvent(
                source_process_id=item.origin_process_id or "", type=ProcessEventType.BLOCKED,
                human_summary=(f"The user revoked the automatic answer to inbox item "
                               f"{item.title!r}; the item is open again, wait for their "
                               f"answer."),
                payload={"itemId": item.id})
        return InboxAnswer(inbox_item_id=item.id, item_type=item.type, title=item.title,
                           answer=item.answer)

    def _notify(self, item: InboxItem, user_id: str) -> None:
        self.notifier.notify(NotifyEvent(
            tenant_id=item.tenant_id, user_id=user_id, item_id=item.id,
            criticality=item.criticality, title=item.title, body=item.body,
            deep_link=item_link(self.base_url, item.id), item=self.view(item),
            project_id=self._project_of(item)))

    def _project_of(self, item: InboxItem) -> str | None:
        """The project the item was asked in (its origin process's, else its origin
        session's), so the project level of the ``notify.*`` settings applies; None for an
        item from outside any session."""
        try:
            if item.origin_process_id is not None:
                return self.processes.get_process(item.tenant_id,
                                                  item.origin_process_id).project_id
            if item.origin_session_id is not None:
                return self.processes.get_session(item.tenant_id,
                                                  item.origin_session_id).project_id
        except NotFound:  # the origin is gone: the user's and tenant's settings still apply
            return None
        return None

    def _push(self, item: InboxItem, event: str, also: str | None = None) -> None:
        """Tell the assignee's connections (and a previous assignee's) about the change."""
        view = self.view(item)
        for user in dict.fromkeys(u for u in (item.assigned_to_user_id, also) if u):
            self.publish(item.tenant_id, user, event, view)

    def _assigned(self, who: Principal, item_id: str) -> InboxItem:
        item = self._visible(who, item_id)
        if item.assigned_to_user_id != who.user_id:
            raise Conflict(f"item {item_id!r} is assigned to {item.assigned_to_user_id!r}; "
                           f"only the assignee can act on it")
        return item

    def _visible(self, who: Principal, item_id: str) -> InboxItem:
        try:
            item = self.store.get_inbox_item(who.tenant_id, item_id)
        except NotFound:
            item = None
        if item is None or who.user_id not in (item.assigned_to_user_id,
                                               item.originator_user_id):
            raise NotFound(f"no inbox item {item_id!r}") from None
        return item

    def _check_user(self, tenant_id: str, user_id: str) -> None:
        try:
            self.identity.get_user(tenant_id, user_id)
        except NotFound:
            raise InvalidInput(f"no user {user_id!r} in this tenant (items are delegated "
                               f"within a tenant only)") from None


_ROUTED = frozenset({HistoryAction.ANSWER, HistoryAction.DISMISS, HistoryAction.REVOKE})


_ARCHIVABLE = frozenset({ItemStatus.ANSWERED, ItemStatus.DISMISSED})


def _require(item: InboxItem, status: ItemStatus, verb: str) -> None:
    if item.status is not status:
        raise Conflict(f"item {item.id!r} is {item.status.value}; only {status.value} items "
                       f"can be {verb}")


def _text(name: str, value: str | None, limit: int, *, required: bool = False) -> str | None:
    if value is None or not value.strip():
        if required:
            raise InvalidInput(f"an inbox item needs a {name}")
        return None
    if len(value) > limit:
        raise InvalidInput(f"inbox item {name} is {len(value)} characters; at most {limit}")
    return value


def _tags(tags: Iterable[str]) -> list[str]:
    cleaned = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
    if len(cleaned) > MAX_TAGS or any(len(t) > MAX_TAG for t in cleaned):
        raise InvalidInput(f"at most {MAX_TAGS} tags of at most {MAX_TAG} characters each")
    return cleaned
