"""MongoDB ``ToolHealthStore``: collection ``tool_health``.

A ``ToolHealth`` with ``_id`` = ``{tenantId, projectId, server, tool}`` (``tool`` ``''``
for the server's own record) and ``probeAt``, its ``nextProbeAt`` while it is not UP
(absent otherwise), indexed for the probe's ``due_tool_health``. Atomicity: each call is
one operation (``put`` an ``insert_one`` of a new record or a ``replace_one`` whose filter
holds the expected ``revision``, ``reset`` one ``delete_many``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from vancetope_brain.models.tool_health import HealthState, ToolHealth
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import from_bson, naive_utc, translated
from vancetope_brain.store.tool_health import ToolHealthStore

_SORT = [("projectId", ASCENDING), ("server", ASCENDING), ("_id.tool", ASCENDING)]


class MongoToolHealth(MongoAdapter, ToolHealthStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._health = db.database["tool_health"]
        self._health.create_index([("tenantId", ASCENDING), ("projectId", ASCENDING),
                                   ("server", ASCENDING)], name="by_project")
        self._health.create_index([("probeAt", ASCENDING)], name="due", sparse=True)

    @translated
    def get_tool_health(self, tenant_id: str, project_id: str, server: str,
                        tool: str | None = None) -> ToolHealth | None:
        raw = self._health.find_one({"_id": _key(tenant_id, project_id, server, tool)})
        return None if raw is None else _load(raw)

    @translated
    def list_tool_health(self, tenant_id: str, project_id: str | None = None) -> list[ToolHealth]:
        query: dict[str, Any] = {"tenantId": tenant_id}
        if project_id is not None:
            query["projectId"] = project_id
        return [_load(raw) for raw in self._health.find(query).sort(_SORT)]

    @translated
    def put_tool_health(self, health: ToolHealth, *,
                        expected_revision: int | None) -> ToolHealth | None:
        stored = health.model_copy(update={"revision": (expected_revision or 0) + 1})
        doc = stored.dump()
        for name in ("since", "checkedAt", "nextProbeAt"):
            if doc[name] is not None:
                doc[name] = naive_utc(datetime.fromisoformat(doc[name]))
        doc["_id"] = _key(*health.key)
        if health.state is not HealthState.UP and health.next_probe_at is not None:
            doc["probeAt"] = doc["nextProbeAt"]
        if expected_revision is None:
            try:
                self._health.insert_one(doc)
            except DuplicateKeyError:
                return None
            return stored
        # A record stored before revisions were kept has none: it reads as revision 0.
        revision: Any = expected_revision or {"$in": [0, None]}
        if self._health.replace_one({"_id": doc["_id"], "revision": revision},
                                    doc).matched_count == 0:
            return None
        return stored

    @translated
    def reset_tool_health(self, tenant_id: str, project_id: str | None = None,
                          server: str | None = None, tool: str | None = None) -> int:
        if tool is not None and server is None:
            raise ValueError("resetting one tool's record needs its server")
        query: dict[str, Any] = {"tenantId": tenant_id}
        for name, value in (("projectId", project_id), ("server", server), ("tool", tool)):
            if value is not None:
                query[name] = value
        return int(self._health.delete_many(query).deleted_count)

    @translated
    def due_tool_health(self, now: datetime, limit: int = 100) -> list[ToolHealth]:
        if limit <= 0:
            return []
        cursor = self._health.find({"probeAt": {"$lte": naive_utc(now)}}).sort(
            [("probeAt", ASCENDING), ("_id.tenantId", ASCENDING)]).limit(limit)
        return [_load(raw) for raw in cursor]


def _key(tenant_id: str, project_id: str, server: str, tool: str | None) -> dict[str, str]:
    return {"tenantId": tenant_id, "projectId": project_id, "server": server,
            "tool": tool or ""}


def _load(raw: dict[str, Any]) -> ToolHealth:
    raw.pop("probeAt", None)
    return from_bson(ToolHealth, raw)
