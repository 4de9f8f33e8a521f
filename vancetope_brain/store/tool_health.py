"""The tool-health port: what is known about MCP servers and their tools, per project."""

from __future__ import annotations

from abc import abstractmethod
from datetime import datetime

from vancetope_brain.models.tool_health import ToolHealth
from vancetope_brain.store.backend import Port


class ToolHealthStore(Port):
    """``ToolHealth`` records keyed by (tenant, project, server, tool); ``tool`` None is the
    whole server's record. Each call is one atomic read or write; ``put`` is a
    compare-and-set on the record's ``revision``, so of two writers that read the same
    record (two probes, a probe and a turn) only one replaces it.
    """

    @abstractmethod
    def get_tool_health(self, tenant_id: str, project_id: str, server: str,
                        tool: str | None = None) -> ToolHealth | None:
        """The record of the server (``tool`` None) or of one of its tools, or None."""

    @abstractmethod
    def list_tool_health(self, tenant_id: str, project_id: str | None = None) -> list[ToolHealth]:
        """The tenant's records (of one project, or of all), by project, server, then tool
        (the server's own record first)."""

    @abstractmethod
    def put_tool_health(self, health: ToolHealth, *,
                        expected_revision: int | None) -> ToolHealth | None:
        """Store ``health`` whole under its key if the stored record's ``revision`` still
        equals ``expected_revision`` (None: if no record is stored); the stored (and
        returned) record has ``revision`` = ``expected_revision + 1`` (1 for a new one).
        Returns None, writing nothing, when the record moved on."""

    @abstractmethod
    def reset_tool_health(self, tenant_id: str, project_id: str | None = None,
                          server: str | None = None, tool: str | None = None) -> int:
        """Delete records of the tenant and return how many: of one project (or all); of one
        server, its own record and its tools' (or every server); of one tool only when
        ``tool`` is given (which needs ``server``)."""

    @abstractmethod
    def due_tool_health(self, now: datetime, limit: int = 100) -> list[ToolHealth]:
        """A system query, across tenants: records not UP whose ``next_probe_at`` is at or
        before ``now``, soonest first, at most ``limit`` (what the background probe runs)."""
