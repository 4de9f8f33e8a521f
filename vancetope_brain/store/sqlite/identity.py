"""SQLite ``IdentityStore``: tables ``tenants``, ``projects``, ``users``, ``api_tokens``.

Atomicity: each call is one statement (a write in its own ``BEGIN IMMEDIATE``
transaction). ``api_tokens.revoked`` is authoritative over ``doc`` (as the
``lanes`` columns are for a process). Administration-sized lists are read in
insertion order, then sorted by ``createdAt`` (stable, so equal times keep
insertion order).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TypeVar

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ApiToken, Project, Tenant, User
from vancetope_brain.store.identity import IdentityStore
from vancetope_brain.store.sqlite import SqliteAdapter
from vancetope_brain.store.sqlite._db import load_all, load_one

_PROJECTS_TABLE = """
CREATE TABLE IF NOT EXISTS projects (
    tenant_id TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (tenant_id, id)
)
"""

_TABLES = f"""
CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY, doc TEXT NOT NULL);
{_PROJECTS_TABLE};
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS users_by_tenant ON users (tenant_id);
-- (Columns added by a migration must be added in _MIGRATIONS too.)
CREATE TABLE IF NOT EXISTS api_tokens (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
    revoked INTEGER NOT NULL, doc TEXT NOT NULL, user_id TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS tokens_by_user ON api_tokens (tenant_id, user_id);
"""

_MIGRATIONS = {
    3: ("ALTER TABLE api_tokens ADD COLUMN user_id TEXT NOT NULL DEFAULT ''",
        "UPDATE api_tokens SET user_id = json_extract(doc, '$.userId')",
        _PROJECTS_TABLE,
        # The document IdentityService.create_tenant writes, dated like its tenant.
        "INSERT OR IGNORE INTO projects (tenant_id, id, doc) SELECT id, 'default', "
        "json_object('schemaVersion', 1, 'id', 'default', 'tenantId', id, 'name', 'default', "
        "'groupId', NULL, 'createdAt', json_extract(doc, '$.createdAt')) FROM tenants"),
}

_D = TypeVar("_D", Tenant, Project, User, ApiToken)


def _oldest_first(records: Iterable[_D]) -> list[_D]:
    return sorted(records, key=lambda record: record.created_at)


def _token(row: tuple[str, int]) -> ApiToken:
    doc, revoked = row
    raw = json.loads(doc)
    raw["revoked"] = bool(revoked)  # the column is authoritative, as for ``lanes``
    return ApiToken.load(raw)


class SqliteIdentity(SqliteAdapter, IdentityStore):
    tables = _TABLES
    migrations = _MIGRATIONS

    def create_tenant(self, tenant: Tenant) -> None:
        self.db.execute("INSERT INTO tenants (id, doc) VALUES (?, ?)",
                        (tenant.id, tenant.model_dump_json(by_alias=True)))

    def list_tenants(self) -> list[Tenant]:
        return _oldest_first(load_all(Tenant, self.db.read(
            "SELECT doc FROM tenants ORDER BY rowid", ())))

    def create_project(self, project: Project) -> None:
        self.db.execute("INSERT INTO projects (tenant_id, id, doc) VALUES (?, ?, ?)",
                        (project.tenant_id, project.id, project.model_dump_json(by_alias=True)))

    def get_project(self, tenant_id: str, project_id: str) -> Project:
        return load_one(Project, self.db.read("SELECT doc FROM projects WHERE tenant_id = ? AND "
                                              "id = ?", (tenant_id, project_id)),
                        f"project {project_id} not found")

    def list_projects(self, tenant_id: str) -> list[Project]:
        return _oldest_first(load_all(Project, self.db.read(
            "SELECT doc FROM projects WHERE tenant_id = ? ORDER BY rowid", (tenant_id,))))

    def create_user(self, user: User) -> None:
        self.db.execute("INSERT INTO users (id, tenant_id, doc) VALUES (?, ?, ?)",
                        (user.id, user.tenant_id, user.model_dump_json(by_alias=True)))

    def list_users(self, tenant_id: str) -> list[User]:
        return _oldest_first(load_all(User, self.db.read(
            "SELECT doc FROM users WHERE tenant_id = ? ORDER BY rowid", (tenant_id,))))

    def get_user(self, tenant_id: str, user_id: str) -> User:
        return load_one(User, self.db.read("SELECT doc FROM users WHERE id = ? AND tenant_id = ?",
                                           (user_id, tenant_id)), f"user {user_id} not found")

    def create_token(self, token: ApiToken) -> None:
        self.db.execute(
            "INSERT INTO api_tokens (id, tenant_id, user_id, token_hash, revoked, doc) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (token.id, token.tenant_id, token.user_id, token.token_hash, int(token.revoked),
             token.model_dump_json(by_alias=True)),
        )

    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        rows = self.db.read(
            "SELECT doc, revoked FROM api_tokens WHERE tenant_id = ? AND user_id = ? "
            "ORDER BY rowid", (tenant_id, user_id))
        return _oldest_first(_token(row) for row in rows)

    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        cursor = self.db.execute(
            "UPDATE api_tokens SET revoked = 1, doc = json_set(doc, '$.revoked', json('true')) "
            "WHERE id = ? AND tenant_id = ?", (token_id, tenant_id))
        if cursor.rowcount == 0:
            raise NotFound(f"token {token_id} not found")

    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        rows = self.db.read(
            "SELECT doc, revoked FROM api_tokens WHERE token_hash = ? AND revoked = 0",
            (token_hash,))
        return _token(rows[0]) if rows else None
