"""WebSocket frames: one envelope ``{type, id, replyTo, data}``, a pydantic model per data shape.

``REQUESTS`` maps each client frame type to its data model and ``REPLIES`` to
the model of its reply; ``PUSHES`` lists what the server sends unasked.
``docs/protocol.md`` and ``docs/schemas/*.json`` are generated from these
(``vancetope schemas``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import Field, StringConstraints, create_model

from vancetope_brain.models import Fingerprint, OnDisconnect, SessionStatus, SessionType
from vancetope_brain.models.base import Wire
from vancetope_brain.models.inbox import Criticality, ItemStatus, Outcome
from vancetope_brain.recipes.kinds import KINDS
from vancetope_brain.recipes.model import KEBAB
from vancetope_brain.sessions.titles import TITLE_MAX

Id = Field(min_length=1, max_length=64)
NotifyMode = Literal["all", "critical-only", "none"]
Tag = Annotated[str, Field(min_length=1, max_length=64)]


class Envelope(Wire):
    """Every frame, both directions. ``id`` is set on requests; replies carry ``replyTo``."""

    type: str = Field(min_length=1, max_length=64)
    id: str | None = Field(default=None, min_length=1, max_length=128)
    reply_to: str | None = Field(default=None, max_length=128)
    data: dict[str, Any] = Field(default_factory=dict)


class ErrorData(Wire):
    """The data of an ``error`` frame; ``code`` is stable, ``message`` is for people."""

    code: str
    message: str


# ── requests (client → server); the reply has the same type and ``replyTo`` ──

class SessionCreate(Wire):
    """Create a session and bind this connection to it. INTERACTIVE sessions get a chat
    process (engine from ``session.defaultChatEngine``); AUTONOMOUS ones get none."""

    title: str = Field(default="", max_length=TITLE_MAX)
    type: SessionType = SessionType.INTERACTIVE
    project_id: str = Field(default="default", min_length=1, max_length=64)
    on_disconnect: OnDisconnect = OnDisconnect.SUSPEND
    idle_timeout_sec: int = Field(default=1800, ge=10, le=30 * 86400)
    fingerprint: Fingerprint | None = None


class SessionResume(Wire):
    """Bind this connection to an existing session (resuming it if SUSPENDED) and replay
    the events after ``lastSeq``. The fingerprint is checked (think-engines §6)."""

    session_id: str = Id
    last_seq: int = Field(default=0, ge=0)
    fingerprint: Fingerprint | None = None


class SessionList(Wire):
    """The caller's sessions, newest first, optionally of one status."""

    status: SessionStatus | None = None


class SessionRef(Wire):
    """Names a session of the caller (``session-get``, ``session-suspend``, ``session-close``)."""

    session_id: str = Id


class SessionRename(Wire):
    """Give a session of the caller a title (in any status); runs of spaces and line breaks
    become one space. An untitled session is titled from the user's first message."""

    session_id: str = Id
    title: str = Field(min_length=1, max_length=TITLE_MAX)


class ProcessCreate(Wire):
    """Create a process in the bound session and start it on its own lane (think-engines
    §8): by ``recipe`` (its engine drives the process) or by ``engine`` (with the recipe
    named like it, if any); with neither, engine ``marvin`` (alias ``deep-think``).
    ``template`` names a workflow template for the engine (engine param ``template``)."""

    engine: str | None = Field(default=None, min_length=1, max_length=64)
    recipe: str | None = Field(default=None, min_length=1, max_length=64)
    template: str | None = Field(default=None, min_length=1, max_length=64)
    goal: str = Field(default="", max_length=32_000)
    name: str = Field(default="", max_length=100)
    params: dict[str, Any] = Field(default_factory=dict)


class ProcessRef(Wire):
    """Names a process of the caller (``process-start`` / ``-pause`` / ``-resume`` / ``-stop`` /
    ``-reset`` / ``-status``)."""

    process_id: str = Id


class ProcessList(Wire):
    """Processes of a session (default: the bound one); non-terminal unless ``all``."""

    session_id: str | None = Field(default=None, max_length=64)
    all: bool = False


class ProcessSteer(Wire):
    """Send user input to a process of the bound session (arthur-engine §3.6 addressing)."""

    target_think_process_id: str = Id
    content: str = Field(min_length=1, max_length=32_000)
    idempotency_key: str | None = Field(default=None, max_length=128)


class ProcessCommand(Wire):
    """Send a high-level command to a process of the bound session, as a client's button
    would (an ExternalCommand, arthur-engine §2.3, §3.4): queued in its inbox like
    ``process-steer``; the engine decides what ``command`` means (Arthur: ``process-steer``
    with ``targetProcessId`` and ``content``, ``process-stop`` with ``targetProcessId``)."""

    process_id: str = Id
    command: str = Field(min_length=1, max_length=64)
    params: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: str | None = Field(default=None, max_length=128)


class ChatHistory(Wire):
    """A page of a process's chat, oldest first; page backwards with ``beforeSeq``."""

    process_id: str = Id
    before_seq: int | None = Field(default=None, ge=1)
    limit: int = Field(default=100, ge=1, le=500)


class EventsResume(Wire):
    """Replay the bound session's events after ``lastSeq``, then continue live."""

    last_seq: int = Field(ge=0)


class ClientToolDef(Wire):
    """A tool the client executes on its machine (arthur-engine §2.2: transparent to engines).
    ``idempotent``: calling it again with the same arguments after a server crash repeats no
    effect (a ``SAFE_PROBE`` always is); a call of any other tool that a crash cut short is
    not repeated without the user's approval. ``requiresEngineRoles``: see the field."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = Field(default="", max_length=4000)
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object",
                                                                "properties": {}})
    safety: Literal["SAFE_PROBE", "MUTATING"] = "MUTATING"
    idempotent: bool = False
    requires_engine_roles: list[Annotated[str, StringConstraints(pattern=KEBAB, max_length=64)]] \
        = Field(default_factory=list, max_length=20)
    """Engine roles a process's recipe must carry to see and call the tool (think-engines
    §7b); none: every engine whose pool holds it."""


class ClientToolsRegister(Wire):
    """Offer (replace) this connection's client-side tools to the bound session's processes."""

    tools: list[ClientToolDef] = Field(max_length=200)


class ToolResultData(Wire):
    """The result of a ``tool-call`` this connection received."""

    tool_call_id: str = Field(min_length=1, max_length=64)
    status: Literal["success", "error"]
    result: Any = None
    error: str | None = Field(default=None, max_length=32_000)


class RecipeList(Wire):
    """The effective recipe catalogue (project → tenant → bundled): per name the innermost
    recipe with its ``source`` and the outer levels it ``shadows``."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)


class RecipeWrite(Wire):
    """Create (``recipe-create``) or replace (``recipe-update``) a recipe of the caller's
    tenant, or of one of its projects with ``projectId``. ``recipe`` is the recipe document
    (the fields of a recipe YAML file); running processes keep the snapshot they got."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)
    recipe: dict[str, Any]


class RecipeDelete(Wire):
    """Delete the recipe stored at this level (tenant, or ``projectId``); outer ones show
    again."""

    project_id: str | None = Field(default=None, min_length=1, max_length=64)
    name: str = Id


def _kind_frames(kind: str, plural: str) -> tuple[dict[str, type[Wire]], dict[str, type[Wire]]]:
    """The ``<kind>-list/-create/-update/-delete`` requests and replies of a definition kind
    other than recipes (e.g. ``strategy-create`` with data ``{projectId?, strategy}``)."""
    title = kind.title()
    scope: Any = (str | None, Field(default=None, min_length=1, max_length=64))

    def model(model_name: str, doc: str, /, **fields: Any) -> type[Wire]:
        return cast(type[Wire], create_model(model_name, __base__=Wire, __doc__=doc, **fields))

    listing = model(f"{title}List", f"The effective {kind} catalogue (project → tenant → "
                    f"bundled): per name the innermost {kind} with its ``source`` and the outer "
                    "levels it ``shadows``.", project_id=scope)
    write = model(f"{title}Write", f"Create (``{kind}-create``) or replace (``{kind}-update``) "
                  f"a {kind} of the caller's tenant, or of one of its projects with "
                  f"``projectId``. ``{kind}`` is the document (the fields of a {kind} YAML file),"
                  " validated before it is stored; running processes keep their snapshot.",
                  project_id=scope, **{kind: (dict[str, Any], ...)})
    delete = model(f"{title}Delete", f"Delete the {kind} stored at this level (tenant, or "
                   "``projectId``); outer ones show again.", project_id=scope,
                   name=(str, Field(min_length=1, max_length=64)))
    listed = model(f"{plural.title()}Listed", f"Reply to ``{kind}-list``: each {kind} document "
                   "with ``source`` and ``shadows``.", **{plural: (list[dict[str, Any]], ...)})
    stored = model(f"{title}Stored", f"Reply to ``{kind}-create`` / ``{kind}-update``: the "
                   f"{kind} as stored.", project_id=(str | None, None),
                   **{kind: (dict[str, Any], ...)})
    deleted = model(f"{title}Deleted", f"Reply to ``{kind}-delete``.",
                    project_id=(str | None, None), name=(str, ...))
    return ({f"{kind}-list": listing, f"{kind}-create": write, f"{kind}-update": write,
             f"{kind}-delete": delete},
            {f"{kind}-list": listed, f"{kind}-create": stored, f"{kind}-update": stored,
             f"{kind}-delete": deleted})


KIND_FRAMES = {name: _kind_frames(name, kind.model.COLLECTION)
               for name, kind in KINDS.items() if name != "recipe"}
"""Per definition kind (recipes have their own frames above): its requests and replies."""


class InboxList(Wire):
    """The caller's Inbox (items assigned to them), newest first. ``status`` defaults to
    everything but ARCHIVED; ``tags``: items carrying every one; ``cursor``: the
    ``nextCursor`` of the previous page."""

    status: list[ItemStatus] | None = Field(default=None, max_length=4)
    criticality: list[Criticality] | None = Field(default=None, max_length=3)
    tags: list[Tag] = Field(default_factory=list, max_length=20)
    session_id: str | None = Field(default=None, min_length=1, max_length=64)
    cursor: str | None = Field(default=None, min_length=1, max_length=200)
    limit: int = Field(default=50, ge=1, le=200)


class InboxItemRef(Wire):
    """Names an item assigned to (or created by) the caller (``inbox-item``,
    ``inbox-archive``, ``inbox-revoke-auto-answer``)."""

    item_id: str = Id


class InboxAnswerData(Wire):
    """Answer an ask assigned to the caller: DECIDED with the type's ``value``
    (user-interaction.txt §6), or INSUFFICIENT_INFO / UNDECIDABLE with a ``reason``."""

    item_id: str = Id
    outcome: Outcome
    value: Any = None
    reason: str | None = Field(default=None, min_length=1, max_length=10_000)


class InboxDelegate(Wire):
    """Hand a PENDING item to another user of the same tenant (they are notified)."""

    item_id: str = Id
    to_user_id: str = Id
    note: str | None = Field(default=None, max_length=2000)


class InboxDismiss(Wire):
    """Click a PENDING item away unanswered; an ask's process gets a skip answer."""

    item_id: str = Id
    note: str | None = Field(default=None, max_length=2000)


class UserList(Wire):
    """The users of the caller's tenant (another tenant's are never listed), oldest first:
    ``id`` and ``name`` only. ``query``: those whose id or name contains it (any case);
    ``cursor``: the ``nextCursor`` of the previous page."""

    query: str | None = Field(default=None, max_length=200)
    cursor: str | None = Field(default=None, min_length=1, max_length=64)
    limit: int = Field(default=50, ge=1, le=200)


class Empty(Wire):
    """No data (``ping``, ``think-engines-list``, ``thinkengines-list``)."""


REQUESTS: dict[str, type[Wire]] = {
    "session-create": SessionCreate,
    "session-resume": SessionResume,
    "session-list": SessionList,
    "session-get": SessionRef,
    "session-suspend": SessionRef,
    "session-close": SessionRef,
    "session-rename": SessionRename,
    "process-create": ProcessCreate,
    "process-start": ProcessRef,
    "process-pause": ProcessRef,
    "process-resume": ProcessRef,
    "process-stop": ProcessRef,
    "process-reset": ProcessRef,
    "process-status": ProcessRef,
    "process-list": ProcessList,
    "process-steer": ProcessSteer,
    "process-command": ProcessCommand,
    "chat-history": ChatHistory,
    "events-resume": EventsResume,
    "client-tools-register": ClientToolsRegister,
    "tool-result": ToolResultData,
    "think-engines-list": Empty,
    "thinkengines-list": Empty,
    "recipe-list": RecipeList,
    "recipe-create": RecipeWrite,
    "recipe-update": RecipeWrite,
    "recipe-delete": RecipeDelete,
    **{t: m for requests, _ in KIND_FRAMES.values() for t, m in requests.items()},
    "inbox-list": InboxList,
    "inbox-item": InboxItemRef,
    "inbox-answer": InboxAnswerData,
    "inbox-delegate": InboxDelegate,
    "inbox-dismiss": InboxDismiss,
    "inbox-archive": InboxItemRef,
    "inbox-revoke-auto-answer": InboxItemRef,
    "inbox-summary": Empty,
    "user-list": UserList,
    "ping": Empty,
}


# ── replies (server → client, ``replyTo`` = the request's id) ─────────────────

class SessionBound(Wire):
    """Reply to ``session-create`` / ``session-resume``: the session, its chat process, the
    session's current last event ``seq`` (events after the requested ``lastSeq`` follow),
    and whether its processes were left SUSPENDED because the working directory changed."""

    session: dict[str, Any]
    chat_process_id: str | None
    last_seq: int
    context_drift: bool = False


class SessionsListed(Wire):
    """Reply to ``session-list``."""

    sessions: list[dict[str, Any]]


class SessionDetail(Wire):
    """Reply to ``session-get`` / ``session-suspend`` / ``session-close`` /
    ``session-rename``: the session and all its processes."""

    session: dict[str, Any]
    processes: list[dict[str, Any]]


class ProcessReply(Wire):
    """Reply to ``process-create`` and the process commands: the process as it is now (a
    lifecycle call is then executed on the process's lane; watch ``status-changed``)."""

    process: dict[str, Any]


class ProcessesListed(Wire):
    """Reply to ``process-list``."""

    processes: list[dict[str, Any]]


class SteerAccepted(Wire):
    """Reply to ``process-steer`` and ``process-command``: the message is persisted in the inbox with this ``seq``;
    ``duplicate`` is true when the idempotency key was seen before (nothing new stored)."""

    message_id: str
    seq: int
    duplicate: bool


class ChatPage(Wire):
    """Reply to ``chat-history``: chat lines, oldest first."""

    messages: list[dict[str, Any]]


class EventsResumed(Wire):
    """Reply to ``events-resume``: the session's current last ``seq``; the missed events follow."""

    last_seq: int


class ClientToolsRegistered(Wire):
    """Reply to ``client-tools-register``: how many tools this connection now offers."""

    registered: int


class ToolResultAccepted(Wire):
    """Reply to ``tool-result``: the result reached the waiting process — or, with
    ``late``, the call had timed out and the result went to the process's inbox as a
    ToolResult message (arthur-engine §2.3)."""

    late: bool = False


class EnginesListed(Wire):
    """Reply to ``think-engines-list`` (also ``thinkengines-list``, the spelling of
    think-engines §8): the registry (name, title, description, version, allowedTools,
    defaultSettings)."""

    engines: list[dict[str, Any]]


class RecipesListed(Wire):
    """Reply to ``recipe-list``: each recipe document with ``source`` and ``shadows``."""

    recipes: list[dict[str, Any]]


class RecipeStored(Wire):
    """Reply to ``recipe-create`` / ``recipe-update``: the recipe as stored."""

    project_id: str | None = None
    recipe: dict[str, Any]


class RecipeDeleted(Wire):
    """Reply to ``recipe-delete``."""

    project_id: str | None = None
    name: str


class InboxPendingSummary(Wire):
    """Right after ``welcome``, and the reply to ``inbox-summary``: the caller's PENDING
    items at a glance (user-interaction.txt §12.5). The Inbox is the truth; pushes only
    speed things up."""

    total_pending: int
    by_criticality: dict[str, int]
    oldest_pending_at: str | None = None


class InboxListed(Wire):
    """Reply to ``inbox-list``: items as the user sees them; ``nextCursor`` when more
    follow."""

    items: list[dict[str, Any]]
    next_cursor: str | None = None


class InboxItemReply(Wire):
    """Reply to ``inbox-item`` and the item commands: the item as it is now."""

    item: dict[str, Any]


class UserEntry(Wire):
    """One user of the tenant as another user sees them (never a token)."""

    id: str
    name: str


class UsersListed(Wire):
    """Reply to ``user-list``: a page of the tenant's users; ``nextCursor`` when more
    follow."""

    users: list[UserEntry]
    next_cursor: str | None = None


class Pong(Wire):
    """Reply to ``ping``."""


REPLIES: dict[str, type[Wire]] = {
    "session-create": SessionBound,
    "session-resume": SessionBound,
    "session-list": SessionsListed,
    "session-get": SessionDetail,
    "session-suspend": SessionDetail,
    "session-close": SessionDetail,
    "session-rename": SessionDetail,
    "process-create": ProcessReply,
    "process-start": ProcessReply,
    "process-pause": ProcessReply,
    "process-resume": ProcessReply,
    "process-stop": ProcessReply,
    "process-reset": ProcessReply,
    "process-status": ProcessReply,
    "process-list": ProcessesListed,
    "process-steer": SteerAccepted,
    "process-command": SteerAccepted,
    "chat-history": ChatPage,
    "events-resume": EventsResumed,
    "client-tools-register": ClientToolsRegistered,
    "tool-result": ToolResultAccepted,
    "think-engines-list": EnginesListed,
    "thinkengines-list": EnginesListed,
    "recipe-list": RecipesListed,
    "recipe-create": RecipeStored,
    "recipe-update": RecipeStored,
    "recipe-delete": RecipeDeleted,
    **{t: m for _, replies in KIND_FRAMES.values() for t, m in replies.items()},
    "inbox-list": InboxListed,
    **{name: InboxItemReply for name in ("inbox-item", "inbox-answer", "inbox-delegate",
                                          "inbox-dismiss", "inbox-archive",
                                          "inbox-revoke-auto-answer")},
    "inbox-summary": InboxPendingSummary,
    "user-list": UsersListed,
    "ping": Pong,
}


# ── pushes (server → client) ────────────────────────────────────────────────

class Welcome(Wire):
    """First frame on every connection: who you are, the server, your sessions at a glance.
    ``notifyMode`` echoes the ``?notifyMode=`` of the connect URL (default ``all``)."""

    server_version: str
    tenant_id: str
    user_id: str
    llm: str
    max_frame_bytes: int
    notify_mode: NotifyMode
    sessions: dict[str, int]


class EventData(Wire):
    """A session stream event (see ``vancetope_brain.events.StreamEvent``)."""

    seq: int
    session_id: str
    process_id: str
    type: str
    data: dict[str, Any]
    at: str


class EventsGap(Wire):
    """Events this client should have had are gone (no longer kept, or lost with the log, e.g.
    a Redis restart) — on resume or live: reload chat history, then go on with the events that
    follow. ``firstAvailable``: the seq of the next event, or 0 when the log holds nothing now."""

    session_id: str
    requested_after: int
    first_available: int


class ToolCall(Wire):
    """A process asks this connection to run one of its registered tools; answer with
    ``tool-result`` within ``timeoutSec``."""

    tool_call_id: str
    tool_name: str
    params: dict[str, Any]
    timeout_sec: float


class InboxPush(Wire):
    """``inbox-item-added`` (a new item for you, or one delegated to you) and
    ``inbox-item-updated`` (status or assignment changed). ``notifyMode`` critical-only
    passes only CRITICAL additions; none passes no additions."""

    item: dict[str, Any]


PUSHES: dict[str, type[Wire]] = {
    "welcome": Welcome,
    "inbox-pending-summary": InboxPendingSummary,
    "inbox-item-added": InboxPush,
    "inbox-item-updated": InboxPush,
    "tool-call": ToolCall,
    "event": EventData,
    "events-gap": EventsGap,
    "error": ErrorData,
}
