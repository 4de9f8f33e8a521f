"""Tool health: what is known about an MCP server or one of its tools (think-engines §7).

A record exists only for a server or tool that has failed at least once: no record
means UP. The checker in the tool dispatch path writes most records, a service
engine (agrajag) writes verdicts, an operator resets them.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow

REASON_LIMIT = 500
"""Characters kept of a reason (it is text for operators and models, never a secret)."""


class HealthState(StrEnum):
    """UP: usable. DEGRADED: usable, failing some calls. DOWN: not offered, calls refused."""

    UP = "UP"
    DEGRADED = "DEGRADED"
    DOWN = "DOWN"


class HealthCause(StrEnum):
    """Why a record is not UP (``probe-verdict``: what a probing service engine concluded)."""

    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    AUTH = "auth"
    BAD_PARAMS = "bad_params"
    RATE_LIMITED = "rate_limited"
    SERVER_ERROR = "server_error"
    PROTOCOL_ERROR = "protocol_error"
    AMBIGUOUS = "ambiguous"
    PROBE_VERDICT = "probe-verdict"


class HealthSource(StrEnum):
    """Who wrote the record."""

    CHECKER = "checker"
    AGRAJAG = "agrajag"
    OPERATOR = "operator"


class ToolHealth(Document):
    """The health of ``server`` (``tool`` None) or of one of its tools (``tool``: the name
    the model sees, ``<server>__<tool>``) in one project of a tenant.

    ``since``: when ``state`` began; ``checked_at``: the last observation;
    ``next_probe_at``: when the background probe looks again (None: never, e.g. UP);
    ``failures``: failed observations in a row (0 once UP); ``revision``: counts writes of
    the record, each a compare-and-set on it (``ToolHealthStore.put_tool_health``), so a
    change of state is recorded, logged and counted by one writer only.
    """

    tenant_id: str
    project_id: str = "default"
    server: str = Field(min_length=1)
    tool: str | None = None
    state: HealthState
    cause: HealthCause | None = None
    reason: str = Field(default="", max_length=REASON_LIMIT)
    since: datetime = Field(default_factory=utcnow)
    checked_at: datetime = Field(default_factory=utcnow)
    next_probe_at: datetime | None = None
    failures: int = Field(default=0, ge=0)
    source: HealthSource = HealthSource.CHECKER
    revision: int = Field(default=0, ge=0)

    @property
    def key(self) -> tuple[str, str, str, str | None]:
        return (self.tenant_id, self.project_id, self.server, self.tool)
