"""The operators' door: the ``/admin/`` REST API (a Flask blueprint), documented by spectree
from its pydantic models and served at ``/admin/openapi.json``.

Every route, the document included, first authenticates the bearer token (401 without a
valid one) and refuses a ``user`` token (403 ``forbidden``), before any input is read. An
``operator`` token acts in its own tenant only: another tenant's path answers 404, as a
tenant that does not exist does. A ``platform`` token acts in every tenant and alone
creates tenants and ``platform`` tokens. The routes call the services the admin CLI
calls (``IdentityService``, ``DeadLetterStore``, ``ToolHealthService``,
``system_sessions``, ``InspectorStore``); each write is appended to the audit log (``AuditLog``) with its
outcome. Lists are paged: ``limit`` (default ``PAGE_LIMIT``, at most ``PAGE_LIMIT_MAX``)
and ``cursor`` (the previous page's ``nextCursor``). Bad input is 400 ``invalid_input``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from itertools import islice
from typing import Any, TypeVar

from flask import Blueprint, Response, current_app, g, jsonify, request
from pydantic import Field
from spectree import Response as Responses
from spectree import SecurityScheme, SpecTree
from spectree.models import SecureType, SecuritySchemeData

from vancetope_brain.errors import Forbidden, InvalidInput, NotFound
from vancetope_brain.identity import Principal
from vancetope_brain.lanes.quota import KEYS as QUOTA_KEYS
from vancetope_brain.models import Role, utcnow
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.base import Wire
from vancetope_brain.models.identity import ApiToken, Tenant, User
from vancetope_brain.models.inspector import TurnInspection
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.models.tool_health import ToolHealth
from vancetope_brain.services import system_sessions
from vancetope_brain.services.audit import Acting
from vancetope_brain.services.usage import MAX_DAYS, MAX_READ
from vancetope_gateway.auth import authenticate
from vancetope_gateway.handlers.usage import ModelUsage, UsageTotals
from vancetope_gateway.parts import Gateway

T = TypeVar("T")

PAGE_LIMIT = 100
"""A page's default size."""
PAGE_LIMIT_MAX = 500
"""The largest page any ``/admin/`` list returns (``limit`` above is 400 ``invalid_input``)."""
TURNS_PAGE_MAX = 100
"""The most inspector records one page of a process's turns holds."""
DEAD_LETTERS_MAX = 1000
"""Dead letters reachable by paging (``DeadLetterStore.MAX_LISTED``): requeue to see more."""

admin = Blueprint("admin", __name__, url_prefix="/admin")


def _refuse_invalid(request: Any, response: Any, error: Exception | None, instance: Any,
                    adapter: Any) -> None:
    """spectree's hook before a route: bad input is the project's ``invalid_input``."""
    if error is not None:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
                             for e in adapter.validation_errors(error))
        raise InvalidInput(problems)


spec = SpecTree(
    "flask", title="Vancetope operator API", version="1", mode="strict", annotations=False,
    before=_refuse_invalid, validation_error_status=400, page_templates={},
    description="The /admin/ routes of a Vancetope gateway (docs/operations.md, "
                "\"Operators\"). Bearer token of role operator (its tenant) or platform "
                "(every tenant); a user token gets 403 on every route.",
    security_schemes=[SecurityScheme(name="bearer", data=SecuritySchemeData(
        type=SecureType.HTTP, scheme="bearer"))],
    security={"bearer": []})


# ── the models of the document ───────────────────────────────────────────────
class Error(Wire):
    code: str
    message: str


class Page(Wire):
    limit: int = Field(PAGE_LIMIT, ge=1, le=PAGE_LIMIT_MAX)
    cursor: str | None = Field(None, max_length=20, pattern=r"^[0-9]+$",
                               description="the previous page's nextCursor")


class AuditQuery(Wire):
    limit: int = Field(PAGE_LIMIT, ge=1, le=PAGE_LIMIT_MAX)
    cursor: str | None = Field(None, max_length=100,
                               description="the previous page's nextCursor")
    tenant: str | None = Field(None, description="only this tenant's records (a platform "
                                                 "operator's default: every tenant's)")


class DeadLetterQuery(Page):
    process: str | None = Field(None, description="only this process's")


class HealthQuery(Page):
    project: str | None = Field(None, description="only this project's")


class HealthReset(Wire):
    project: str | None = None
    server: str | None = None
    tool: str | None = Field(None, description="needs server; e.g. echo__add")


class SystemQuery(Page):
    project: str | None = Field(None, description="only this project's")


class NewTenant(Wire):
    name: str
    id: str | None = None


class NewUser(Wire):
    name: str
    id: str | None = None


class NewToken(Wire):
    label: str = ""
    role: Role = Role.USER


class TokenView(Wire):
    """A token's record without its hash."""

    id: str
    tenant_id: str
    user_id: str
    label: str
    role: Role
    revoked: bool
    created_at: datetime


class Tenants(Wire):
    tenants: list[Tenant]
    next_cursor: str | None


class Users(Wire):
    users: list[User]
    next_cursor: str | None


class Tokens(Wire):
    tokens: list[TokenView]
    next_cursor: str | None


class CreatedToken(Wire):
    token: TokenView
    secret: str = Field(description="the bearer secret: shown in this response only")


class RevokedToken(Wire):
    revoked: str


class Healths(Wire):
    records: list[ToolHealth]
    next_cursor: str | None


class ResetCount(Wire):
    reset: int


class DeadLetters(Wire):
    messages: list[dict[str, Any]] = Field(description="inbox messages with a deadLetter mark")
    next_cursor: str | None


class Requeued(Wire):
    message: dict[str, Any]


class SystemSession(Wire):
    session: dict[str, Any]
    processes: list[dict[str, Any]]


class SystemSessions(Wire):
    sessions: list[SystemSession]
    next_cursor: str | None


class TurnQuery(Wire):
    limit: int = Field(20, ge=1, le=TURNS_PAGE_MAX)
    cursor: str | None = Field(None, max_length=100,
                               description="the previous page's nextCursor")


class Turns(Wire):
    turns: list[TurnInspection] = Field(description="newest first, without steps and tools")
    next_cursor: str | None


class Turn(Wire):
    turn: TurnInspection


class AuditPage(Wire):
    records: list[AuditRecord]
    next_cursor: str | None


class UsageQuery(Wire):
    since: date | None = Field(None, description="first day (UTC), default: the 1st of "
                                                 "this month")
    until: date | None = Field(None, description="last day (UTC), included; default: today")
    user: str | None = Field(None, max_length=64, description="only this user's")


class UserDayUsage(ModelUsage):
    """One user's usage of one model on one day (sessions and projects summed)."""

    day: date
    user_id: str


class AdminUsage(Wire):
    since: date
    until: date
    rows: list[UserDayUsage]
    totals: UsageTotals
    truncated: bool = Field(description=f"the range held more than {MAX_READ} stored rows; "
                                        "ask for fewer days or one user")


QUOTA_KEY = r"^quota\.(tenant|user)\.(tokens|cost)Per(Day|Month)$"


class QuotaQuery(Wire):
    user: str | None = Field(None, max_length=64, description="also this user's own values")


class Quotas(Wire):
    """The quota settings stored at the tenant's level and, when asked, at a user's (null:
    unset there); docs/configuration.md, "Quotas"."""

    tenant: dict[str, float | None]
    user: dict[str, float | None] | None


class QuotaWrite(Wire):
    key: str = Field(pattern=QUOTA_KEY, description="e.g. quota.tenant.tokensPerDay")
    value: float | None = Field(description="null: unset it at this level")
    user: str | None = Field(None, max_length=64,
                             description="set it for this user (quota.user.* only)")


def _answers(ok: type[Wire], *codes: int) -> Responses:
    """The responses of a route: ``ok`` for 200, ``Error`` for 401, 403 and ``codes``."""
    return Responses(HTTP_200=ok, HTTP_401=Error, HTTP_403=Error,
                     **{f"HTTP_{code}": Error for code in codes})


# ── the door ─────────────────────────────────────────────────────────────────
@admin.before_request
def _operators_only() -> None:
    """Before anything is read: 401 without a valid token, 403 for a ``user`` token."""
    who = authenticate()
    if not who.operator:
        raise Forbidden("the /admin/ API needs an operator token (vancetope admin token "
                        "create --role operator)")
    g.operator = who


def _who() -> Principal:
    operator: Principal = g.operator
    return operator


def _gateway() -> Gateway:
    return current_app.extensions["vancetope"]


def _tenant(tenant_id: str) -> str:
    """The tenant, if this operator may act in it and it exists; else ``NotFound`` alike."""
    if not _who().sees(tenant_id):
        raise NotFound(f"tenant {tenant_id} not found")
    _gateway().identity.require_tenant(tenant_id)
    return tenant_id


@contextmanager
def _audited(action: str, tenant_id: str, target: str) -> Iterator[Acting]:
    """Record the block as ``action`` in ``tenant_id``'s log; an attempt on a tenant this
    operator may not see goes to its own tenant's log, so that other tenant learns nothing
    of it either."""
    who = _who()
    with _gateway().operations.audit.action(f"user {who.user_id} token {who.token_id}", action,
                                 tenant_id if who.sees(tenant_id) else who.tenant_id,
                                 target) as acting:
        yield acting


def _query(model: type[T]) -> T:
    query: T = request.context.query  # type: ignore[attr-defined]
    return query


def _body(model: type[T]) -> T:
    """The validated JSON body (spectree reads none from a form: refused here)."""
    body: T | None = request.context.json  # type: ignore[attr-defined]
    if body is None:
        raise InvalidInput("the body must be a JSON object (Content-Type: application/json)")
    return body


def _page(items: Iterable[T], page: Page) -> tuple[list[T], str | None]:
    """The page of ``items`` after ``cursor`` (an offset) and the next page's cursor."""
    start = int(page.cursor or 0)
    found = list(islice(items, start, start + page.limit + 1))
    more = len(found) > page.limit
    return found[:page.limit], str(start + page.limit) if more else None


def _token_view(token: ApiToken) -> dict[str, Any]:
    return TokenView(id=token.id, tenant_id=token.tenant_id, user_id=token.user_id,
                     label=token.label, role=token.role, revoked=token.revoked,
                     created_at=token.created_at).dump()


@admin.get("/openapi.json")
def openapi() -> Response:
    """This API's OpenAPI document (spectree's, from the routes below)."""
    return jsonify(spec.spec)


# ── tenants, users, tokens ───────────────────────────────────────────────────
@admin.get("/tenants")
@spec.validate(query=Page, resp=_answers(Tenants, 400))
def tenants() -> Response:
    """The tenants this operator may act in (a tenant operator: its own), oldest first."""
    who = _who()
    seen = (t for t in _gateway().identity.list_tenants() if who.sees(t.id))
    found, cursor = _page(seen, _query(Page))
    return jsonify(tenants=[t.dump() for t in found], nextCursor=cursor)


@admin.post("/tenants")
@spec.validate(json=NewTenant, resp=_answers(Tenant, 400, 409))
def create_tenant() -> Response:
    """Create a tenant with its project ``default``: platform operators only."""
    body = _body(NewTenant)
    with _audited("tenant.create", body.id or "", body.id or body.name) as acting:
        if _who().role is not Role.PLATFORM:
            raise Forbidden("only a platform operator creates tenants")
        tenant = _gateway().identity.create_tenant(body.name, body.id)
        acting.tenant_id = acting.target = tenant.id
    return jsonify(tenant.dump())


@admin.get("/tenants/<tenant_id>/users")
@spec.validate(query=Page, resp=_answers(Users, 400, 404))
def users(tenant_id: str) -> Response:
    """The tenant's users, oldest first."""
    found, cursor = _page(_gateway().identity.list_users(_tenant(tenant_id)), _query(Page))
    return jsonify(users=[u.dump() for u in found], nextCursor=cursor)


@admin.post("/tenants/<tenant_id>/users")
@spec.validate(json=NewUser, resp=_answers(User, 400, 404, 409))
def create_user(tenant_id: str) -> Response:
    """Create a user of the tenant (user ids are unique across tenants)."""
    body = _body(NewUser)
    with _audited("user.create", tenant_id, body.id or body.name) as acting:
        user = _gateway().identity.create_user(_tenant(tenant_id), body.name, body.id)
        acting.target = user.id
    return jsonify(user.dump())


@admin.get("/tenants/<tenant_id>/users/<user_id>/tokens")
@spec.validate(query=Page, resp=_answers(Tokens, 400, 404))
def tokens(tenant_id: str, user_id: str) -> Response:
    """The user's tokens, revoked ones too, oldest first (never a secret or a hash)."""
    found, cursor = _page(_gateway().identity.list_tokens(_tenant(tenant_id), user_id),
                          _query(Page))
    return jsonify(tokens=[_token_view(t) for t in found], nextCursor=cursor)


@admin.post("/tenants/<tenant_id>/users/<user_id>/tokens")
@spec.validate(json=NewToken, resp=_answers(CreatedToken, 400, 404))
def create_token(tenant_id: str, user_id: str) -> Response:
    """Create a token for the user; its secret is in this response only. A ``platform``
    token: platform operators only."""
    body = _body(NewToken)
    with _audited("token.create", tenant_id, f"user {user_id} role {body.role}") as acting:
        if body.role is Role.PLATFORM and _who().role is not Role.PLATFORM:
            raise Forbidden("only a platform operator creates platform tokens")
        token, secret = _gateway().identity.create_token(_tenant(tenant_id), user_id,
                                                         body.label, body.role)
        acting.target = f"{token.id} user {user_id} role {token.role}"
    return jsonify(token=_token_view(token), secret=secret)


@admin.post("/tenants/<tenant_id>/tokens/<token_id>/revoke")
@spec.validate(resp=_answers(RevokedToken, 404))
def revoke_token(tenant_id: str, token_id: str) -> Response:
    """Revoke a token of the tenant at once (idempotent); open sockets it opened close."""
    with _audited("token.revoke", tenant_id, token_id):
        _gateway().identity.revoke_token(_tenant(tenant_id), token_id)
    return jsonify(revoked=token_id)


# ── tool health, dead letters, system sessions ───────────────────────────────
@admin.get("/tenants/<tenant_id>/tool-health")
@spec.validate(query=HealthQuery, resp=_answers(Healths, 400, 404))
def tool_health(tenant_id: str) -> Response:
    """MCP servers and tools of the tenant known not to be UP (no record: UP)."""
    query = _query(HealthQuery)
    records = _gateway().operations.tool_health.store.list_tool_health(_tenant(tenant_id), query.project)
    found, cursor = _page(records, query)
    return jsonify(records=[r.dump() for r in found], nextCursor=cursor)


@admin.post("/tenants/<tenant_id>/tool-health/reset")
@spec.validate(json=HealthReset, resp=_answers(ResetCount, 400, 404))
def reset_tool_health(tenant_id: str) -> Response:
    """Forget records (all of the tenant, or of project / server / tool): UP at once."""
    body = _body(HealthReset)
    target = " ".join(f"{name}={value}" for name, value in body.model_dump().items()
                      if value is not None) or "*"
    with _audited("tool-health.reset", tenant_id, target):
        if body.tool is not None and body.server is None:
            raise InvalidInput("tool needs server (the tool's MCP server)")
        count = _gateway().operations.tool_health.reset(_tenant(tenant_id), body.project, body.server,
                                             body.tool)
    return jsonify(reset=count)


@admin.get("/tenants/<tenant_id>/dead-letters")
@spec.validate(query=DeadLetterQuery, resp=_answers(DeadLetters, 400, 404))
def dead_letters(tenant_id: str) -> Response:
    """Messages set aside unprocessed, oldest first (the first ``DEAD_LETTERS_MAX``)."""
    query = _query(DeadLetterQuery)
    messages = _gateway().operations.dead_letters.dead_letters(_tenant(tenant_id), query.process,
                                                    limit=DEAD_LETTERS_MAX)
    found, cursor = _page(messages, query)
    return jsonify(messages=[m.dump() for m in found], nextCursor=cursor)


@admin.post("/tenants/<tenant_id>/dead-letters/<message_id>/requeue")
@spec.validate(resp=_answers(Requeued, 404, 409))
def requeue_dead_letter(tenant_id: str, message_id: str) -> Response:
    """Put a dead letter back into its process's inbox (attempts reset); the sweeper wakes
    the process."""
    with _audited("dead-letter.requeue", tenant_id, message_id):
        message = _gateway().operations.dead_letters.requeue_dead_letter(_tenant(tenant_id), message_id)
    return jsonify(message=message.dump())


@admin.get("/tenants/<tenant_id>/system-sessions")
@spec.validate(query=SystemQuery, resp=_answers(SystemSessions, 400, 404))
def system_session_list(tenant_id: str) -> Response:
    """Service engines' hidden sessions of the tenant with their processes, newest first."""
    query = _query(SystemQuery)
    store = _gateway().operations.sessions
    sessions = (s for s in system_sessions(store, _tenant(tenant_id))
                if query.project in (None, s.project_id))
    found, cursor = _page(sessions, query)
    return jsonify(sessions=[{"session": s.dump(),
                              "processes": [p.dump() for p in store.list_processes(tenant_id,
                                                                                   s.id)]}
                             for s in found], nextCursor=cursor)


# ── usage and quotas ─────────────────────────────────────────────────────────
@admin.get("/tenants/<tenant_id>/usage")
@spec.validate(query=UsageQuery, resp=_answers(AdminUsage, 400, 404))
def usage(tenant_id: str) -> Response:
    """LLM tokens of committed turns per day (UTC), user and model, with their cost by the
    tenant's ``llm.prices``: at most a range of ``MAX_DAYS`` days (default this month)."""
    query = _query(UsageQuery)
    until = query.until or utcnow().date()
    since = query.since or until.replace(day=1)
    if not since <= until <= since + timedelta(days=MAX_DAYS - 1):
        raise InvalidInput(f"since <= until, at most {MAX_DAYS} days apart")
    found = _gateway().usage.of_tenant(_tenant(tenant_id), since, until, user_id=query.user)
    rows = [UserDayUsage(day=d.day, user_id=d.user_id, model=m.model, tokens_in=m.tokens_in,
                         tokens_out=m.tokens_out, calls=m.calls,
                         estimated_calls=m.estimated_calls, cost=m.cost)
            for d in found.days for m in d.totals.models]
    return jsonify(AdminUsage(since=since, until=until, rows=rows,
                              totals=UsageTotals.of(found.totals),
                              truncated=found.truncated).dump())


@admin.get("/tenants/<tenant_id>/quotas")
@spec.validate(query=QuotaQuery, resp=_answers(Quotas, 400, 404))
def quotas(tenant_id: str) -> Response:
    """The tenant's quota settings, and a user's own when ``user`` is given."""
    query = _query(QuotaQuery)
    settings = _gateway().settings
    stored = settings.stored(_tenant(tenant_id), SettingScope.tenant())
    mine = None
    if query.user is not None:
        _gateway().identity.require_user(tenant_id, query.user)
        own = settings.stored(tenant_id, SettingScope.user(query.user))
        mine = {k: own.get(k) for k in QUOTA_KEYS if k.startswith("quota.user.")}
    return jsonify(Quotas(tenant={k: stored.get(k) for k in QUOTA_KEYS}, user=mine).dump())


@admin.post("/tenants/<tenant_id>/quotas")
@spec.validate(json=QuotaWrite, resp=_answers(Quotas, 400, 404))
def set_quota(tenant_id: str) -> Response:
    """Set (or, with ``value`` null, unset) one quota at the tenant's level or a user's.
    The processes the tenant's quotas hold look again at the next sweep."""
    body = _body(QuotaWrite)
    scope = SettingScope.tenant() if body.user is None else SettingScope.user(body.user)
    with _audited("quota.set", tenant_id, f"{body.key}={body.value} {scope}"):
        settings = _gateway().settings
        if body.value is None:
            settings.unset(_tenant(tenant_id), scope, body.key)
        else:
            value = int(body.value) if ".tokens" in body.key and body.value.is_integer() \
                else body.value
            settings.set(_tenant(tenant_id), scope, body.key, value)
    stored = settings.stored(tenant_id, scope)
    values = {k: stored.get(k) for k in QUOTA_KEYS}
    return jsonify(Quotas(tenant=values if body.user is None else {},
                          user=None if body.user is None else values).dump())


# ── the inspector ────────────────────────────────────────────────────────────
@admin.get("/tenants/<tenant_id>/processes/<process_id>/turns")
@spec.validate(query=TurnQuery, resp=_answers(Turns, 400, 404))
def turns(tenant_id: str, process_id: str) -> Response:
    """The inspector records of a process of the tenant (a user's or a service's), newest
    first, each without its steps (``…/turns/<turn_id>`` has them)."""
    query = _query(TurnQuery)
    _gateway().operations.sessions.get_process(_tenant(tenant_id), process_id)
    found, cursor = _gateway().inspections.page(tenant_id, process_id, query.cursor,
                                                query.limit)
    return jsonify(turns=[t.dump() for t in found], nextCursor=cursor)


@admin.get("/tenants/<tenant_id>/turns/<turn_id>")
@spec.validate(resp=_answers(Turn, 404))
def turn(tenant_id: str, turn_id: str) -> Response:
    """One turn's inspector record: the model's input and output, the tool calls, tokens and
    timings (texts cut to the record's caps, secrets redacted)."""
    return jsonify(turn=_gateway().inspections.get(_tenant(tenant_id), turn_id).dump())


# ── the audit log ────────────────────────────────────────────────────────────
@admin.get("/audit")
@spec.validate(query=AuditQuery, resp=_answers(AuditPage, 400, 404))
def audit() -> Response:
    """Operator actions, newest first: a tenant operator's tenant's; a platform operator's
    of every tenant, or of ``tenant``."""
    query = _query(AuditQuery)
    who = _who()
    tenant = query.tenant if query.tenant is not None else \
        None if who.role is Role.PLATFORM else who.tenant_id
    if tenant is not None and not who.sees(tenant):
        raise NotFound(f"tenant {tenant} not found")
    page = _gateway().operations.audit.page(tenant, query.cursor, query.limit)
    return jsonify(records=[r.dump() for r in page.records], nextCursor=page.next_cursor)
