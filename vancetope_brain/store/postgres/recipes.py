"""PostgreSQL ``RecipeStore``: table ``recipes``.

A row holds the validated definition's dump (with its schema version) under
(tenant, project or ``''``, kind, name); ``kind`` is ``recipe``, ``strategy``, ….
``name`` sorts bytewise (``COLLATE "C"``), as on SQLite.

Atomicity: each call is one transaction. ``create_definition`` with a ``limit``
first takes a transaction-scoped advisory lock on (tenant, kind), then counts the
tenant's definitions of that kind and inserts in one statement: at READ COMMITTED
a count alone would not see a concurrent insert, so without the lock two writers
at the cap could both pass it. A duplicate name raises ``Conflict`` (the primary key).
"""

from __future__ import annotations

from typing import Any, TypeVar

import psycopg

from vancetope_brain.errors import Conflict, NotFound
from vancetope_brain.models.recipe import Definition
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all, load_one
from vancetope_brain.store.recipes import RecipeStore, over_limit, recipe_level

D = TypeVar("D", bound=Definition)

_TABLES = """
CREATE TABLE IF NOT EXISTS recipes (
    tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, kind TEXT NOT NULL,
    name TEXT COLLATE "C" NOT NULL, doc JSONB NOT NULL,
    PRIMARY KEY (tenant_id, project_id, kind, name)
);
CREATE INDEX IF NOT EXISTS recipes_by_kind ON recipes (tenant_id, kind);
"""

_LIMIT_LOCK = 0x7663_7265
"""The first key of the advisory lock that serialises capped creates of one (tenant, kind)."""


def limit_lock_in(conn: psycopg.Connection[Any], tenant_id: str, kind: str) -> None:
    """Take the advisory lock of capped creates of (tenant, kind) until the transaction
    ends."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                 (_LIMIT_LOCK, f"{tenant_id}\x1f{kind}"))


class PostgresRecipes(PostgresAdapter, RecipeStore):
    tables = _TABLES

    def create_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition, limit: int | None = None) -> None:
        try:
            with self.db.write() as conn:
                if limit is not None:
                    limit_lock_in(conn, tenant_id, definition.KIND)
                cursor = conn.execute(
                    "INSERT INTO recipes (tenant_id, project_id, kind, name, doc) "
                    "SELECT %s, %s, %s, %s, %s WHERE %s::bigint IS NULL OR "
                    "(SELECT COUNT(*) FROM recipes WHERE tenant_id = %s AND kind = %s) "
                    "< %s::bigint",
                    (tenant_id, project_id or "", definition.KIND, definition.name,
                     doc_json(definition), limit, tenant_id,
                     definition.KIND, limit))
        except Conflict as e:
            raise Conflict(f"{definition.KIND} {definition.name} already exists in "
                           f"{recipe_level(tenant_id, project_id)}") from e
        if cursor.rowcount == 0:
            raise over_limit(definition.KIND, tenant_id, limit or 0)

    def update_definition(self, tenant_id: str, project_id: str | None,
                          definition: Definition) -> None:
        changed = self.db.execute(
            "UPDATE recipes SET doc = %s WHERE tenant_id = %s AND project_id = %s AND kind = %s "
            "AND name = %s",
            (doc_json(definition), tenant_id, project_id or "",
             definition.KIND, definition.name))
        if changed == 0:
            raise NotFound(f"{definition.KIND} {definition.name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    def delete_definition(self, kind: type[Definition], tenant_id: str, project_id: str | None,
                          name: str) -> None:
        changed = self.db.execute(
            "DELETE FROM recipes WHERE tenant_id = %s AND project_id = %s AND kind = %s "
            "AND name = %s", (tenant_id, project_id or "", kind.KIND, name))
        if changed == 0:
            raise NotFound(f"{kind.KIND} {name} not found in "
                           f"{recipe_level(tenant_id, project_id)}")

    def get_definition(self, kind: type[D], tenant_id: str, project_id: str | None,
                       name: str) -> D:
        return load_one(kind, self.db.read(
            "SELECT doc FROM recipes WHERE tenant_id = %s AND project_id = %s AND kind = %s "
            "AND name = %s", (tenant_id, project_id or "", kind.KIND, name)),
            f"{kind.KIND} {name} not found in {recipe_level(tenant_id, project_id)}")

    def list_definitions(self, kind: type[D], tenant_id: str, project_id: str | None) -> list[D]:
        return load_all(kind, self.db.read(
            "SELECT doc FROM recipes WHERE tenant_id = %s AND project_id = %s AND kind = %s "
            "ORDER BY name", (tenant_id, project_id or "", kind.KIND)))
