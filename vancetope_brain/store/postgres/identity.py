"""PostgreSQL ``IdentityStore``: tables ``tenants``, ``projects``, ``users``, ``api_tokens``.

A project is keyed by (tenant, id), since project ids are unique only within their
tenant (every tenant has ``default``: ``IdentityService.create_tenant`` writes it
before the tenant). A token is found by its hash (``api_tokens.token_hash`` is
unique); ``api_tokens.revoked`` is authoritative over ``doc`` (as the ``lanes``
columns are for a process).

Atomicity: each call is one statement in its own transaction; a duplicate key
raises ``Conflict`` (the backend translates the unique violation). Ordering: each
table has an identity column ``row_no`` (insertion order, as SQLite's ``rowid``);
administration-sized lists are read in that order, then sorted by ``createdAt``
(stable, so equal times keep insertion order).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ApiToken, Project, Tenant, User
from vancetope_brain.store.identity import IdentityStore
from vancetope_brain.store.postgres import PostgresAdapter
from vancetope_brain.store.postgres._db import doc_json, load_all, load_one

_TABLES = """
CREATE TABLE IF NOT EXISTS tenants (
    id TEXT PRIMARY KEY, row_no BIGINT GENERATED ALWAYS AS IDENTITY, doc JSONB NOT NULL
);
CREATE TABLE IF NOT EXISTS projects (
    tenant_id TEXT NOT NULL, id TEXT NOT NULL, row_no BIGINT GENERATED ALWAYS AS IDENTITY,
    doc JSONB NOT NULL, PRIMARY KEY (tenant_id, id)
);
CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, row_no BIGINT GENERATED ALWAYS AS IDENTITY,
    doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS users_by_tenant ON users (tenant_id, row_no);
CREATE TABLE IF NOT EXISTS api_tokens (
    id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, user_id TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE, revoked BOOLEAN NOT NULL,
    row_no BIGINT GENERATED ALWAYS AS IDENTITY, doc JSONB NOT NULL
);
CREATE INDEX IF NOT EXISTS tokens_by_user ON api_tokens (tenant_id, user_id, row_no);
"""

_D = TypeVar("_D", Tenant, Project, User, ApiToken)


def _oldest_first(records: Iterable[_D]) -> list[_D]:
    return sorted(records, key=lambda record: record.created_at)


def _token(row: Any) -> ApiToken:
    doc, revoked = row
    return ApiToken.load({**doc, "revoked": revoked})  # the column is authoritative


class PostgresIdentity(PostgresAdapter, IdentityStore):
    tables = _TABLES

    def create_tenant(self, tenant: Tenant) -> None:
        self.db.execute("INSERT INTO tenants (id, doc) VALUES (%s, %s)",
                        (tenant.id, doc_json(tenant)))

    def list_tenants(self) -> list[Tenant]:
        return _oldest_first(load_all(Tenant, self.db.read(
            "SELECT doc FROM tenants ORDER BY row_no")))

    def create_project(self, project: Project) -> None:
        self.db.execute("INSERT INTO projects (tenant_id, id, doc) VALUES (%s, %s, %s)",
                        (project.tenant_id, project.id, doc_json(project)))

    def get_project(self, tenant_id: str, project_id: str) -> Project:
        return load_one(Project, self.db.read(
            "SELECT doc FROM projects WHERE tenant_id = %s AND id = %s", (tenant_id, project_id)),
            f"project {project_id} not found")

    def list_projects(self, tenant_id: str) -> list[Project]:
        return _oldest_first(load_all(Project, self.db.read(
            "SELECT doc FROM projects WHERE tenant_id = %s ORDER BY row_no", (tenant_id,))))

    def create_user(self, user: User) -> None:
        self.db.execute("INSERT INTO users (id, tenant_id, doc) VALUES (%s, %s, %s)",
                        (user.id, user.tenant_id, doc_json(user)))

    def list_users(self, tenant_id: str) -> list[User]:
        return _oldest_first(load_all(User, self.db.read(
            "SELECT doc FROM users WHERE tenant_id = %s ORDER BY row_no", (tenant_id,))))

    def get_user(self, tenant_id: str, user_id: str) -> User:
        return load_one(User, self.db.read(
            "SELECT doc FROM users WHERE id = %s AND tenant_id = %s", (user_id, tenant_id)),
            f"user {user_id} not found")

    def create_token(self, token: ApiToken) -> None:
        self.db.execute(
            "INSERT INTO api_tokens (id, tenant_id, user_id, token_hash, revoked, doc) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            (token.id, token.tenant_id, token.user_id, token.token_hash, token.revoked,
             doc_json(token)))

    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        rows = self.db.read(
            "SELECT doc, revoked FROM api_tokens WHERE tenant_id = %s AND user_id = %s "
            "ORDER BY row_no", (tenant_id, user_id))
        return _oldest_first(_token(row) for row in rows)

    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        changed = self.db.execute(
            "UPDATE api_tokens SET revoked = TRUE, doc = jsonb_set(doc, '{revoked}', 'true') "
            "WHERE id = %s AND tenant_id = %s", (token_id, tenant_id))
        if changed == 0:
            raise NotFound(f"token {token_id} not found")

    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        rows = self.db.read(
            "SELECT doc, revoked FROM api_tokens WHERE token_hash = %s AND NOT revoked",
            (token_hash,))
        return _token(rows[0]) if rows else None
