"""Tool health: the checker in the MCP dispatch path, and what follows from it (think-engines §7).

Every failure of an MCP server or tool is classified here without an LLM
(``classify``, ``classify_text``) and recorded in ``tool_health`` for the turn's
project: the whole server DOWN when it cannot be reached, hangs, refuses the
credentials or breaks the protocol while connecting or listing; DEGRADED when it
rate-limits or one call times out (DOWN once ``TIMEOUTS_TO_DOWN`` failures in a row
end in timeouts); one tool DEGRADED when a call meets a server error or a protocol
error. A caller's bad parameters change nothing. What fits no rule is
*ambiguous*: the ``on_ambiguous`` hook gets it (a service engine diagnoses it and
writes a verdict with ``ToolHealthService.write``); the checker writes nothing.

What follows: a DOWN server is not listed (so no turn waits on it) and its tools
are left out of the manifest, or offered with their status (``VANCETOPE_DOWN_TOOLS``);
a call to one fails at once naming the server and the cause. The background probe
(``ToolHealthService.probe_due``, run by the housekeeping beat, never in a turn)
connects and lists again when a record's ``next_probe_at`` is due, with back-off,
and marks it UP when the server answers. A change of state is logged at WARNING
(``tool health: …``) and counted, once: every write is a compare-and-set on the
record's revision, and only the writer that replaced the record announces it (two
probes that overlap, or a probe and a turn, read the same DOWN record; one wins).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from vancetope_brain.models import ThinkProcess, utcnow
from vancetope_brain.models.steer import ToolCallStatus
from vancetope_brain.models.tool_health import (
    REASON_LIMIT,
    HealthCause,
    HealthSource,
    HealthState,
    ToolHealth,
)
from vancetope_brain.observability import metrics
from vancetope_brain.store.tool_health import ToolHealthStore
from vancetope_brain.tools import dispatcher

if TYPE_CHECKING:
    from vancetope_brain.tools.mcp import McpRegistry

log = logging.getLogger(__name__)

Step = Literal["connect", "list", "call"]

MAX_PROBES = 100
"""Records one probe run looks at (the soonest due; the rest wait for the next run)."""

TIMEOUTS_TO_DOWN = 3
"""The failure in a row (no success, no answered listing between) at which a server whose
calls time out is DOWN; before it, DEGRADED: one slow call is no hung server, and hiding all
of its tools for it would cost more than a second wait."""


@dataclass(frozen=True)
class Failure:
    """One classified failure: of ``server`` (``tool`` None: connecting or listing) or of a
    call; ``answered``: the tool itself answered with an error (``isError``), so the server
    is reachable and speaks the protocol."""

    server: str
    tool: str | None
    step: Step
    cause: HealthCause
    summary: str
    seconds: float
    answered: bool = False


@dataclass(frozen=True)
class AmbiguousToolError:
    """What the ``on_ambiguous`` hook gets: a failure no rule classifies, and who met it."""

    tenant_id: str
    project_id: str
    user_id: str
    session_id: str
    process_id: str
    server: str
    tool: str | None
    step: Step
    error: str
    at: datetime


OnAmbiguous = Callable[[AmbiguousToolError], None]


def _ignore(event: AmbiguousToolError) -> None:
    """The default hook: nothing diagnoses ambiguous failures."""


# ── classification ──────────────────────────────────────────────────────────

_AUTH = re.compile(r"\b(401|403)\b|unauthori[sz]ed|forbidden|authenticat|invalid (api[ _-]?)?"
                   r"(key|token|credentials)|permission denied", re.I)
_RATE = re.compile(r"\b429\b|rate[ _-]?limit|too many requests|quota exceeded", re.I)
_SERVER = re.compile(r"\b50[0-4]\b|internal server error|service unavailable|bad gateway", re.I)
_CALLER = re.compile(r"validation error|field required|input should be|not a valid|missing "
                     r"(required )?(argument|param)|unknown (argument|param)|invalid (argument|"
                     r"param|input|value)|\binvalid [a-z_ ]{1,30}:", re.I)


def classify_text(text: str) -> HealthCause:
    """The cause a tool's own error text (an ``isError`` result) shows, else AMBIGUOUS. The
    SDKs report arguments that fail the tool's schema this way too (``bad_params``)."""
    for pattern, cause in ((_AUTH, HealthCause.AUTH), (_RATE, HealthCause.RATE_LIMITED),
                           (_SERVER, HealthCause.SERVER_ERROR), (_CALLER, HealthCause.BAD_PARAMS)):
        if pattern.search(text):
            return cause
    return HealthCause.AMBIGUOUS


def classify(error: BaseException) -> HealthCause:
    """The cause of an exception met while connecting, listing or calling."""
    import anyio
    import httpx2
    from mcp import MCPError
    from pydantic import ValidationError

    for e in _chain(error):
        if isinstance(e, TimeoutError | httpx2.TimeoutException):
            return HealthCause.TIMEOUT
        if isinstance(e, httpx2.HTTPStatusError):
            return status_cause(e.response.status_code)
        if isinstance(e, MCPError):
            return _mcp_codes().get(e.code) or classify_text(str(e))
        if isinstance(e, httpx2.ConnectError | OSError | anyio.BrokenResourceError
                      | anyio.ClosedResourceError | anyio.EndOfStream):
            return HealthCause.UNREACHABLE
        if isinstance(e, httpx2.RemoteProtocolError | httpx2.DecodingError | ValidationError
                      | ValueError):
            return HealthCause.PROTOCOL_ERROR
    return HealthCause.AMBIGUOUS


def status_cause(status: int) -> HealthCause:
    """The cause an HTTP error status shows."""
    if status in (401, 403, 407):
        return HealthCause.AUTH
    if status == 429:
        return HealthCause.RATE_LIMITED
    return HealthCause.SERVER_ERROR if status >= 500 else HealthCause.PROTOCOL_ERROR


def _mcp_codes() -> dict[int, HealthCause]:
    from mcp import types

    return {types.INVALID_PARAMS: HealthCause.BAD_PARAMS,
            types.CONNECTION_CLOSED: HealthCause.UNREACHABLE,
            types.REQUEST_TIMEOUT: HealthCause.TIMEOUT,
            types.INTERNAL_ERROR: HealthCause.SERVER_ERROR,
            types.PARSE_ERROR: HealthCause.PROTOCOL_ERROR,
            types.INVALID_REQUEST: HealthCause.PROTOCOL_ERROR,
            types.METHOD_NOT_FOUND: HealthCause.PROTOCOL_ERROR,
            types.UNSUPPORTED_PROTOCOL_VERSION: HealthCause.PROTOCOL_ERROR,
            types.HEADER_MISMATCH: HealthCause.PROTOCOL_ERROR}


def _chain(error: BaseException) -> Iterable[BaseException]:
    """The exception, then what it wraps: a group's members (depth first), causes, contexts."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        e = todo.pop(0)
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, BaseExceptionGroup):
            todo[:0] = list(e.exceptions)
            continue
        yield e
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)


def _verdict(failure: Failure) -> tuple[str | None, HealthState] | None:
    """(tool or None for the server, state) a failure sets, or None when it sets nothing."""
    cause = failure.cause
    if cause in (HealthCause.BAD_PARAMS, HealthCause.AMBIGUOUS):
        return None
    if cause is HealthCause.RATE_LIMITED:
        return None, HealthState.DEGRADED
    if failure.answered:  # the tool's own error: the server is fine, the tool is not
        return failure.tool, HealthState.DEGRADED
    if failure.step != "call" or failure.tool is None:
        return None, HealthState.DOWN
    if cause is HealthCause.TIMEOUT:  # one slow call; repeated ones: ``_escalated``
        return None, HealthState.DEGRADED
    if cause in (HealthCause.UNREACHABLE, HealthCause.AUTH):
        return None, HealthState.DOWN
    return failure.tool, HealthState.DEGRADED  # a server or protocol error in one call


def _escalated(state: HealthState, failure: Failure, known: ToolHealth | None,
               failures: int) -> HealthState:
    """The state a failure sets, given the record it replaces (``known``) and the failures in
    a row it makes: a call timeout after timeouts is DOWN at ``TIMEOUTS_TO_DOWN``."""
    if state is HealthState.DEGRADED and failure.cause is HealthCause.TIMEOUT and \
            known is not None and known.cause is HealthCause.TIMEOUT and \
            failures >= TIMEOUTS_TO_DOWN:
        return HealthState.DOWN
    return state


# ── the service ─────────────────────────────────────────────────────────────

@dataclass(frozen=True)
class HealthPolicy:
    """``backoff``: seconds until the first probe, doubled per failed probe up to
    ``backoff_max``; ``show_down``: offer a DOWN server's tools with their status
    instead of leaving them out."""

    backoff: float = 30.0
    backoff_max: float = 600.0
    show_down: bool = False


@dataclass
class ToolHealthService:
    """Records failures and recoveries, answers what is DOWN, runs the background probe."""

    store: ToolHealthStore
    policy: HealthPolicy = field(default_factory=HealthPolicy)
    on_ambiguous: OnAmbiguous = _ignore

    def source(self, registry: McpRegistry, process: ThinkProcess) -> CheckedMcp:
        """The MCP tools of ``registry`` for one turn of ``process``, health applied."""
        return CheckedMcp(registry, self, process)

    def write(self, health: ToolHealth) -> None:
        """Store a record (a verdict, a probe's finding) over whatever is stored, and announce
        a change of state."""
        while self._put(self.store.get_tool_health(*health.key), health) is None:
            pass  # another writer came between the read and the write: read again

    def reset(self, tenant_id: str, project_id: str | None = None, server: str | None = None,
              tool: str | None = None) -> int:
        """An operator's reset: delete the matching records (UP at once: the next turn lists
        and calls again) and log it; returns how many."""
        count = self.store.reset_tool_health(tenant_id, project_id, server, tool)
        if count:
            log.warning("tool health: operator reset %d record(s) of tenant %s (project %s, "
                        "server %s, tool %s) -> UP", count, tenant_id, project_id or "*",
                        server or "*", tool or "*")
        return count

    def failed(self, process: ThinkProcess, failure: Failure,
               known: ToolHealth | None) -> ToolHealth | None:
        """Record what ``failure`` means for the process's project; the record written, if any.
        ``known`` is the current record of the key the failure sets."""
        if failure.cause is HealthCause.AMBIGUOUS:
            self._ambiguous(process, failure)
            return None
        verdict = _verdict(failure)
        if verdict is None:
            return None
        tool, state = verdict
        while (written := self._put(known, self._observed(process, failure, tool, state,
                                                          known))) is None:
            # Another writer came first: count this failure on top of what it wrote.
            known = self.store.get_tool_health(process.tenant_id, process.project_id,
                                               failure.server, tool)
        return written

    def _observed(self, process: ThinkProcess, failure: Failure, tool: str | None,
                  state: HealthState, known: ToolHealth | None) -> ToolHealth:
        """The record ``failure`` makes of ``known``."""
        now = utcnow()
        failures = (known.failures if known is not None and known.state is not HealthState.UP
                    else 0) + 1
        state = _escalated(state, failure, known, failures)
        same = known is not None and known.state is state
        return ToolHealth(
            tenant_id=process.tenant_id, project_id=process.project_id, server=failure.server,
            tool=tool, state=state, cause=failure.cause, reason=_reason(failure),
            since=known.since if same and known is not None else now, checked_at=now,
            next_probe_at=now + self._backoff(failures), failures=failures)

    def recovered(self, known: ToolHealth) -> ToolHealth | None:
        """Mark ``known`` UP (the server answered, or the tool succeeded) unless the record
        changed since it was read: then the other writer's record stands (it may be this
        very recovery, by an overlapping probe). Returns the record stored now (None: none)."""
        now = utcnow()
        up = replace_health(known, state=HealthState.UP, cause=None, reason="answered again",
                            since=now, checked_at=now, next_probe_at=None, failures=0,
                            source=HealthSource.CHECKER)
        return self._put(known, up) or self.store.get_tool_health(*known.key)

    def probe_due(self, registry: McpRegistry, now: datetime | None = None) -> int:
        """The beat's part: probe each server with a due record once (connect and list) and
        update its records; returns how many records it looked at."""
        due = self.store.due_tool_health(now or utcnow(), MAX_PROBES)
        by_server: dict[str, list[ToolHealth]] = {}
        for record in due:
            by_server.setdefault(record.server, []).append(record)
        for server, records in by_server.items():
            if server not in registry.servers:
                for record in records:  # no longer configured: look again much later
                    self._put(record, replace_health(
                        record, next_probe_at=utcnow() + timedelta(seconds=self.policy.backoff_max)))
                continue
            failure, listed = registry.probe(server)
            for record in records:
                if failure is None and (record.tool is None or record.tool in listed):
                    self.recovered(record)
                    continue
                failures = record.failures + 1
                reason = (_reason(failure) if failure is not None
                          else f"probe: the server no longer lists {record.tool}")
                self._put(record, replace_health(  # lost to a newer observation: it stands
                    record, reason=reason, checked_at=utcnow(), failures=failures,
                    next_probe_at=utcnow() + self._backoff(failures)))
        return len(due)

    def _put(self, known: ToolHealth | None, record: ToolHealth) -> ToolHealth | None:
        """Write ``record`` over ``known`` — what the caller read, None: no record — if the
        store still holds that, and announce the change of state; the record stored, or
        None when another writer replaced ``known`` first (nothing written or announced)."""
        stored = self.store.put_tool_health(
            record, expected_revision=None if known is None else known.revision)
        if stored is not None:
            self._announce(known, stored)
        return stored

    def _backoff(self, failures: int) -> timedelta:
        seconds = self.policy.backoff * 2 ** min(max(failures - 1, 0), 30)
        return timedelta(seconds=min(seconds, self.policy.backoff_max))

    def _ambiguous(self, process: ThinkProcess, failure: Failure) -> None:
        event = AmbiguousToolError(
            tenant_id=process.tenant_id, project_id=process.project_id,
            user_id=process.user_id, session_id=process.session_id, process_id=process.id,
            server=failure.server, tool=failure.tool, step=failure.step,
            error=failure.summary[:REASON_LIMIT], at=utcnow())
        try:
            self.on_ambiguous(event)
        except Exception:  # a diagnosis that cannot start must not fail the turn
            log.exception("the ambiguous-tool-error hook failed for server %r, tool %s",
                          failure.server, failure.tool)

    @staticmethod
    def _announce(before: ToolHealth | None, after: ToolHealth) -> None:
        was = before.state if before is not None else HealthState.UP
        if was is after.state:
            return
        metrics.TOOL_HEALTH_CHANGES.labels(after.server, after.state.value,
                                           after.cause.value if after.cause else "",
                                           after.source.value).inc()
        what = f"server {after.server!r}" + (f", tool {after.tool}" if after.tool else "")
        log.warning("tool health: %s (tenant %s, project %s) %s -> %s%s%s", what,
                    after.tenant_id, after.project_id, was, after.state,
                    f" ({after.cause}: {after.reason})" if after.cause else "",
                    f" [{after.source}]" if after.source is not HealthSource.CHECKER else "")


def replace_health(record: ToolHealth, **changes: Any) -> ToolHealth:
    """A copy of ``record`` with ``changes``, validated."""
    return ToolHealth.model_validate({**record.model_dump(), **changes})


def _reason(failure: Failure) -> str:
    text = f"{failure.step}: {failure.summary} (after {failure.seconds:.1f} s)"
    return text if len(text) <= REASON_LIMIT else text[:REASON_LIMIT - 1] + "…"


def describe_down(record: ToolHealth) -> str:
    """How a refused call names the server (or tool), its state and cause."""
    what = (f"tool {record.tool!r} of MCP server {record.server!r}" if record.tool
            else f"MCP server {record.server!r}")
    since = record.since.strftime("%Y-%m-%d %H:%M:%SZ")
    retry = (f"; the next probe is due {record.next_probe_at.strftime('%H:%M:%SZ')}"
             if record.next_probe_at is not None else "")
    return (f"{what} is {record.state} ({record.cause or 'unknown'} since {since}: "
            f"{record.reason}){retry}. Do not retry now: tell the user, or use another tool. "
            "Operators: `vancetope admin tool-health list`.")


# ── the per-turn source ─────────────────────────────────────────────────────

class CheckedMcp:
    """The dispatcher's MCP source for one turn: the project's health read once, DOWN servers
    not listed, DOWN tools hidden (or shown with their status), calls to them refused at
    once, and every failure recorded."""

    def __init__(self, registry: McpRegistry, service: ToolHealthService,
                 process: ThinkProcess) -> None:
        self._registry = registry
        self._service = service
        self._process = process
        self._known: dict[tuple[str, str | None], ToolHealth] | None = None
        self._unlisted: dict[str, Failure] = {}  # servers whose listing failed this turn

    def manifests(self) -> list[dispatcher.ToolManifest]:
        if not self._registry.servers:
            return []
        down = {s for s in self._registry.servers if self._down(s, None) is not None}
        shown: list[dispatcher.ToolManifest] = []
        for survey in self._registry.survey(skip=down):
            if survey.failure is not None:
                self._unlisted[survey.server] = survey.failure
                self._failed(survey.failure)
                continue
            if survey.answered:  # a listing from the cache shows nothing about the server
                self._answered(survey.server, None)
            shown += self._with_health(survey.manifests)
        if self._service.policy.show_down:
            for server in sorted(down):
                shown += self._with_health(self._registry.known_manifests(server))
        return shown

    def call(self, name: str, params: dict[str, Any]) -> dispatcher.ToolOutcome:
        refused = self._down_record(name)
        if refused is not None:
            return dispatcher.ToolOutcome.failed(describe_down(refused))
        outcome, failure = self._registry.attempt(name, params)
        server = name.partition("__")[0]
        if failure is not None:
            self._failed(failure)
        elif outcome.status is ToolCallStatus.SUCCESS:
            self._answered(server, name)
        return outcome

    def unavailable(self, name: str) -> str | None:
        """Why ``name`` (not offered this turn) cannot be called: its server or it is DOWN,
        its server could not list its tools, or does not list this one; None when ``name``
        is no MCP tool's name."""
        if not self._registry.owns(name):
            return None
        record = self._down_record(name)
        if record is not None:
            return describe_down(record)
        server = name.partition("__")[0]
        failure = self._unlisted.get(server)
        if failure is not None:
            return (f"MCP server {server!r} could not list its tools ({failure.cause}: "
                    f"{failure.step}: {failure.summary})")
        return f"MCP server {server!r} lists no tool {name!r}"

    def _down_record(self, name: str) -> ToolHealth | None:
        """The DOWN record of the tool ``name`` or of its server."""
        server = name.partition("__")[0]
        return self._down(server, None) or self._down(server, name)

    def _with_health(self, manifests: list[dispatcher.ToolManifest]
                     ) -> list[dispatcher.ToolManifest]:
        kept = []
        for manifest in manifests:
            record = self._down_record(manifest.name)
            if record is None:
                kept.append(manifest)
            elif self._service.policy.show_down:
                note = f"[UNAVAILABLE: {record.state}, {record.cause}; calls fail until it recovers] "
                kept.append(replace(manifest, spec=replace(
                    manifest.spec, description=note + manifest.spec.description)))
        return kept

    def _health(self) -> dict[tuple[str, str | None], ToolHealth]:
        if self._known is None:
            p = self._process
            self._known = {(r.server, r.tool): r for r in
                           self._service.store.list_tool_health(p.tenant_id, p.project_id)}
        return self._known

    def _down(self, server: str, tool: str | None) -> ToolHealth | None:
        record = self._health().get((server, tool))
        return record if record is not None and record.state is HealthState.DOWN else None

    def _failed(self, failure: Failure) -> None:
        verdict = _verdict(failure)
        key = (failure.server, verdict[0] if verdict is not None else None)
        written = self._service.failed(self._process, failure, self._health().get(key))
        if written is not None:
            self._health()[key] = written

    def _answered(self, server: str, tool: str | None) -> None:
        """The server listed (``tool`` None) or the tool's call succeeded: their DEGRADED
        records are UP again."""
        for key in ((server, None), (server, tool)) if tool else ((server, None),):
            record = self._health().get(key)
            if record is not None and record.state is HealthState.DEGRADED:
                now = self._service.recovered(record)
                if now is None:
                    del self._health()[key]
                else:
                    self._health()[key] = now

