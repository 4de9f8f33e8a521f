"""The Store port: the domain-level persistence contract every adapter honours.

Guarantees common to all methods:

* Tenant scoping: a record of another tenant is indistinguishable from a
  missing one (``NotFound`` / ``None`` / absent from lists).
* Records are returned as pydantic documents, never adapter types.
* Writes are durable when the method returns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any

from vancetope_brain.errors import ConfigError
from vancetope_brain.models import (
    ApiToken,
    ChatMessage,
    Fingerprint,
    InboxMessage,
    ProcessStatus,
    Project,
    Session,
    SessionStatus,
    SuspendCause,
    Tenant,
    ThinkProcess,
    TurnCommit,
    TurnRecord,
    User,
)
from vancetope_brain.models.inbox import (
    DeliveryStatus,
    InboxItem,
    InboxQuery,
    NotificationDelivery,
)
from vancetope_brain.recipes.model import Recipe
from vancetope_brain.settings import SettingScope


class Store(ABC):
    """Persistence for tenants, sessions, processes, inboxes, chats, turn records, recipes,
    settings, user Inbox items and notification deliveries."""

    # ── identity ──────────────────────────────────────────────────────────
    @abstractmethod
    def create_tenant(self, tenant: Tenant) -> None:
        """Insert a tenant. Raises ``Conflict`` if the id exists."""

    @abstractmethod
    def list_tenants(self) -> list[Tenant]:
        """System query for administration: every tenant, oldest first."""

    @abstractmethod
    def create_project(self, project: Project) -> None:
        """Insert a project. Raises ``Conflict`` if the id exists in the tenant."""

    @abstractmethod
    def get_project(self, tenant_id: str, project_id: str) -> Project:
        """The project. Raises ``NotFound``."""

    @abstractmethod
    def list_projects(self, tenant_id: str) -> list[Project]:
        """The tenant's projects, oldest first."""

    @abstractmethod
    def create_user(self, user: User) -> None:
        """Insert a user. Raises ``Conflict`` if the id exists."""

    @abstractmethod
    def list_users(self, tenant_id: str) -> list[User]:
        """The tenant's users, oldest first."""

    @abstractmethod
    def get_user(self, tenant_id: str, user_id: str) -> User:
        """The user. Raises ``NotFound``."""

    @abstractmethod
    def create_token(self, token: ApiToken) -> None:
        """Insert an API token record (hash only)."""

    @abstractmethod
    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        """The user's tokens (revoked ones included), oldest first."""

    @abstractmethod
    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        """Mark the token revoked; from then on ``token_by_hash`` ignores it. Idempotent.
        Raises ``NotFound``."""

    @abstractmethod
    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        """System query (authentication precedes tenancy): the non-revoked token with this hash."""

    # ── sessions ──────────────────────────────────────────────────────────
    @abstractmethod
    def create_session(self, session: Session) -> None:
        """Insert a session."""

    @abstractmethod
    def get_session(self, tenant_id: str, session_id: str) -> Session:
        """The session. Raises ``NotFound``."""

    @abstractmethod
    def list_sessions(self, tenant_id: str, user_id: str) -> list[Session]:
        """The user's sessions, newest first."""

    @abstractmethod
    def set_chat_process(self, tenant_id: str, session_id: str, process_id: str) -> None:
        """Atomically set ``chatProcessId`` of the session. Raises ``NotFound``."""

    @abstractmethod
    def update_session_status(self, tenant_id: str, session_id: str, status: SessionStatus, *,
                              allowed_from: frozenset[SessionStatus],
                              suspend_cause: SuspendCause | None = None) -> Session:
        """Atomically move the session to ``status`` if its status is in ``allowed_from``;
        sets ``suspendCause`` (cleared unless given) and ``updatedAt``. Returns the updated
        session. Raises ``Conflict`` naming the current status, or ``NotFound``.
        """

    @abstractmethod
    def set_fingerprint(self, tenant_id: str, session_id: str,
                        fingerprint: Fingerprint) -> Session:
        """Store the client fingerprint unless one is already stored (the first bind wins,
        atomically). Returns the session as stored. Raises ``NotFound``."""

    # ── processes ─────────────────────────────────────────────────────────
    @abstractmethod
    def create_process(self, process: ThinkProcess) -> None:
        """Insert a process document (status INIT, epoch 0)."""

    @abstractmethod
    def get_process(self, tenant_id: str, process_id: str) -> ThinkProcess:
        """The process. Raises ``NotFound``."""

    @abstractmethod
    def list_processes(self, tenant_id: str, session_id: str) -> list[ThinkProcess]:
        """The session's processes, oldest first."""

    @abstractmethod
    def set_context_drift(self, tenant_id: str, process_id: str, drift: bool) -> None:
        """Set the process's ``contextDrift`` flag. Raises ``NotFound``."""

    @abstractmethod
    def acquire_epoch(self, tenant_id: str, process_id: str) -> ThinkProcess:
        """Start a lane turn: atomically increment ``epoch`` and, if the status is INIT, IDLE
        or BLOCKED, set it to RUNNING.

        Returns the document with the *new* epoch and the status it had *before*
        this call (the engine needs to know where it came from). Any turn holding
        an older epoch is fenced from then on. Raises ``NotFound``.
        """

    @abstractmethod
    def request_control(self, tenant_id: str, process_id: str, call: str,
                        allowed_from: frozenset[ProcessStatus]) -> ThinkProcess:
        """Atomically record a lifecycle call for the next lane turn, if the status allows it.

        Sets ``pendingControl = call`` and ``controlRequestedAt = now`` (replacing
        any earlier request) only while the status is in ``allowed_from``, and
        returns the updated document. Raises ``Conflict`` naming the current
        status otherwise, ``NotFound`` if the process does not exist.
        """

    @abstractmethod
    def commit_turn(self, tenant_id: str, process_id: str, epoch: int,
                    commit: TurnCommit) -> list[ChatMessage] | None:
        """Apply a turn's effects all-or-nothing, only if ``epoch`` is still current.

        Effects: mark ``commit.drained_ids`` drained (with this epoch), append
        ``commit.chat`` with consecutive chat ``seq`` numbers in list order, set
        status / closeReason / lastError / engineState, insert ``commit.record``,
        insert ``commit.spawned`` processes and append ``commit.outbox`` messages to
        their targets' inboxes (as ``append_message`` does),
        and clear ``pendingControl`` (and ``controlRequestedAt``) if it still equals
        ``commit.control_handled`` (a newer request survives).
        Returns the chat lines as written (with their ``seq``), or None, having
        written nothing, when the epoch moved on (fenced) or a listed message
        was already drained. Chat lines whose (process, sourceMessageId, role)
        already exists are skipped and not returned.
        """

    # ── inbox ─────────────────────────────────────────────────────────────
    @abstractmethod
    def append_message(self, message: InboxMessage) -> tuple[InboxMessage, bool]:
        """Persist a message into its target's inbox, assigning the next per-process ``seq``.

        Sequence numbers are strictly increasing per process in the order the
        appends complete. A repeated (target, idempotencyKey) stores nothing
        and returns the first message with ``False``. Raises ``NotFound`` if
        the target process does not exist in the tenant.
        """

    @abstractmethod
    def pending_messages(self, tenant_id: str, process_id: str, limit: int = 1000) -> list[InboxMessage]:
        """Undrained messages of the process in ``seq`` order (at most ``limit``)."""

    @abstractmethod
    def stale_pending(self, older_than: datetime, limit: int = 100) -> list[tuple[str, str]]:
        """System query for the sweeper: distinct (tenant, process) pairs that need a turn and
        were left waiting since before ``older_than``: an undrained message of a process that is
        not CLOSED, PAUSED or SUSPENDED, or a ``pendingControl`` of a process that is not CLOSED
        requested before ``older_than``.
        """

    # ── the user Inbox (user-interaction.txt §3) ─────────────────────────
    @abstractmethod
    def create_inbox_item(self, item: InboxItem) -> tuple[InboxItem, bool]:
        """Insert an item. When both ``originProcessId`` and ``idempotencyKey`` are set and an
        item with the same pair exists in the tenant, store nothing and return that first item
        with ``False`` (also under concurrent creates)."""

    @abstractmethod
    def get_inbox_item(self, tenant_id: str, item_id: str) -> InboxItem:
        """The item. Raises ``NotFound``."""

    @abstractmethod
    def save_inbox_item(self, item: InboxItem, *, expected_revision: int,
                        message: InboxMessage | None = None) -> InboxItem:
        """Replace the stored item whole if its stored ``revision`` still equals
        ``expected_revision``; the stored (and returned) item has ``revision`` =
        ``expected_revision + 1``. ``message``, if given, is appended to its target's inbox
        (as ``append_message`` does) in the same all-or-nothing write.
        Raises ``Conflict`` if the revision moved on (nothing written), ``NotFound`` if the
        item (or the message's target process) does not exist in the tenant.
        """

    @abstractmethod
    def redeliver_inbox_messages(self, limit: int = 100) -> int:
        """System query for housekeeping: append the messages of ``save_inbox_item`` calls
        that were cut short after the item was written (an adapter whose save is one
        transaction never has any). Idempotent; returns how many it appended."""

    @abstractmethod
    def list_inbox_items(self, tenant_id: str, query: InboxQuery) -> list[InboxItem]:
        """Items matching every filter of ``query``, newest first (``createdAt`` then ``id``,
        both descending), at most ``query.limit``; ``query.before`` continues after the
        given (createdAt, id)."""

    @abstractmethod
    def inbox_pending_counts(self, tenant_id: str,
                             user_id: str) -> tuple[dict[str, int], datetime | None]:
        """PENDING items assigned to the user: a count per criticality (only those with at
        least one item) and the oldest one's ``createdAt`` (None when there are none)."""

    # ── notification delivery log (user-interaction.txt §12.6) ──────────
    @abstractmethod
    def add_delivery(self, delivery: NotificationDelivery) -> None:
        """Insert one delivery attempt."""

    @abstractmethod
    def list_deliveries(self, tenant_id: str, *, item_id: str | None = None,
                        user_id: str | None = None) -> list[NotificationDelivery]:
        """The tenant's deliveries matching the given filters, oldest first."""

    @abstractmethod
    def queued_deliveries(self, channel: str, limit: int = 1000) -> list[NotificationDelivery]:
        """System query for the batch job: deliveries of ``channel`` in status QUEUED, all
        tenants, oldest first."""

    @abstractmethod
    def finish_delivery(self, tenant_id: str, delivery_id: str, status: DeliveryStatus, *,
                        reason: str | None = None, sent_at: datetime | None = None) -> bool:
        """Move a QUEUED delivery to ``status`` (with reason / sentAt). Returns False, changing
        nothing, if it is not QUEUED any more (another run finished it)."""

    # ── chat and audit ────────────────────────────────────────────────────
    @abstractmethod
    def chat_history(
        self, tenant_id: str, process_id: str, *, before_seq: int | None = None, limit: int = 100
    ) -> list[ChatMessage]:
        """The last ``limit`` chat lines of the process before ``before_seq``, oldest first."""

    @abstractmethod
    def turn_records(self, tenant_id: str, process_id: str) -> list[TurnRecord]:
        """The process's committed turns in epoch order."""

    # ── tenant configuration: recipes and settings ───────────────────────
    # A recipe lives at the tenant level (``project_id=None``) or in a project;
    # names are unique per level. Each call is one atomic write or read.
    @abstractmethod
    def create_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        """Insert a recipe. Raises ``Conflict`` if the name exists at this level."""

    @abstractmethod
    def update_recipe(self, tenant_id: str, project_id: str | None, recipe: Recipe) -> None:
        """Replace the recipe of that name at this level whole. Raises ``NotFound``."""

    @abstractmethod
    def delete_recipe(self, tenant_id: str, project_id: str | None, name: str) -> None:
        """Delete the recipe at this level (others of that name stay). Raises ``NotFound``."""

    @abstractmethod
    def get_recipe(self, tenant_id: str, project_id: str | None, name: str) -> Recipe:
        """The recipe stored at exactly this level. Raises ``NotFound``."""

    @abstractmethod
    def list_recipes(self, tenant_id: str, project_id: str | None) -> list[Recipe]:
        """The recipes stored at exactly this level, by name."""

    @abstractmethod
    def get_setting(self, tenant_id: str, scope: SettingScope, key: str) -> Any | None:
        """The value stored for ``key`` at exactly this scope, or None."""

    @abstractmethod
    def set_setting(self, tenant_id: str, scope: SettingScope, key: str, value: Any) -> None:
        """Store (insert or replace) a JSON value, not None; the caller has validated it."""

    @abstractmethod
    def delete_setting(self, tenant_id: str, scope: SettingScope, key: str) -> None:
        """Remove the value stored at this scope. Raises ``NotFound``."""

    @abstractmethod
    def list_settings(self, tenant_id: str, scope: SettingScope) -> dict[str, Any]:
        """The values stored at exactly this scope, by key."""

    # ── plumbing ──────────────────────────────────────────────────────────
    @abstractmethod
    def ping(self) -> None:
        """Raise ``StoreError`` unless the store answers."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def open_store(url: str) -> Store:
    """Open the adapter named by the URL: ``sqlite:///path`` or ``mongodb://…``."""
    if url.startswith("sqlite:///"):
        from vancetope_brain.store.sqlite import SqliteStore

        return SqliteStore(url.removeprefix("sqlite:///"))
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from vancetope_brain.store.mongo import MongoStore

        return MongoStore(url)
    raise ConfigError(
        f"unsupported VANCETOPE_STORE_URL {url!r}: use sqlite:///PATH or mongodb://HOST/DB"
    )
