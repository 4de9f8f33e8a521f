"""The PostgreSQL schema: created once however many pods open it together, migrated forward
from the previous version's data in one transaction, refused when newer than the server."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import psycopg
import pytest

import vancetope_brain.store.postgres as postgres_store
import vancetope_brain.store.postgres._db as postgres_db
from vancetope_brain.config import redacted_url
from vancetope_brain.errors import ConfigError, StoreError
from vancetope_brain.models import ApiToken, Role
from vancetope_brain.models.audit import AuditRecord
from vancetope_brain.models.settings import SettingLevel, SettingScope
from vancetope_brain.store import AuditStore, IdentityStore, SettingStore
from vancetope_brain.store.postgres import PostgresAdapter, PostgresBackend, _split_url
from vancetope_brain.store.postgres._db import SCHEMA_VERSION, create_schema, function

SCOPE = SettingScope(level=SettingLevel.TENANT, id="")
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {name for (name,) in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}


def _rewind(url: str) -> None:
    """Make the stored schema version 1 (the first), as an older server left it."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = 1")


def _migrate(url: str, version: int, migrations: dict[int, list[str]]) -> None:
    owners = list(PostgresAdapter.registry.values())
    with psycopg.connect(url, autocommit=True) as conn:
        create_schema(conn, [owner.tables for owner in owners], [migrations], version)


def test_a_new_store_is_at_this_servers_version_and_reopening_changes_nothing(
        postgres_url: str) -> None:
    first = PostgresBackend(postgres_url)
    first.port(SettingStore).set_setting("ten_1", SCOPE, "chat.summaryThreshold", 40)
    tables = _tables(postgres_url)
    assert "settings" in tables and "schema_version" in tables
    again = PostgresBackend(postgres_url)
    assert again.schema_version() == first.schema_version() == SCHEMA_VERSION
    assert again.port(SettingStore).list_settings("ten_1", SCOPE) == {"chat.summaryThreshold": 40}
    assert _tables(postgres_url) == tables
    first.close()
    again.close()


def test_pods_that_open_a_new_store_at_once_create_it_once(postgres_url: str) -> None:
    # Without the advisory lock, concurrent CREATE TABLE IF NOT EXISTS collide in the
    # catalogue (a unique violation on pg_type) and some opens fail.
    start = threading.Barrier(8)

    def open_one(_: int) -> int | None:
        start.wait()
        backend = PostgresBackend(postgres_url)
        try:
            return backend.schema_version()
        finally:
            backend.close()

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(open_one, range(8))) == [SCHEMA_VERSION] * 8


def test_a_migration_brings_the_previous_versions_data_forward(postgres_url: str) -> None:
    backend = PostgresBackend(postgres_url)
    backend.port(SettingStore).set_setting("ten_1", SCOPE, "chat.summaryThreshold", 40)
    backend.close()
    _rewind(postgres_url)
    _migrate(postgres_url, 2, {2: [
        "ALTER TABLE settings ADD COLUMN changed_by TEXT NOT NULL DEFAULT 'operator'"]})
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT key, changed_by, doc->>'value' FROM settings").fetchall() \
            == [("chat.summaryThreshold", "operator", "40")]
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (2,)


def test_each_open_makes_its_functions_beside_another_versions_and_calls_its_own(
        postgres_url: str) -> None:
    # A store of this schema version written before the functions existed gets them at open,
    # with no migration; one that holds another code version's function (a rolling upgrade:
    # older pods still run) keeps it, and each version calls the body it ships.
    commit_turn, record_steps = function("commit_turn"), function("record_steps")
    older = record_steps.name[:-12] + "000000000000"
    PostgresBackend(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"DROP FUNCTION {commit_turn.name}")
        conn.execute(f"CREATE FUNCTION {older}(p_tenant text, "
                     "p_process text, p_epoch bigint, p_keys text[], p_states text[], "
                     "p_docs jsonb, p_max integer) RETURNS text "
                     "LANGUAGE sql AS $$ SELECT 'older' $$")
    backend = PostgresBackend(postgres_url)
    try:
        assert backend.schema_version() == SCHEMA_VERSION
        assert backend.read(
            f"SELECT {record_steps.name}('ten_1', 'proc_missing', 1, '{{}}', '{{}}', '[]', 10)"
        ) == [("missing",)]
        assert backend.read(f"SELECT {older}('ten_1', 'p', 1, '{{}}', '{{}}', '[]', 10)") \
            == [("older",)]
        assert backend.read(f"SELECT {commit_turn.name}('ten_1', 'proc_missing', 1, '[]', "
                            "'idle', NULL, '{}', '{}', false, false, 'in_doubt', 'turn_1', "
                            "'{}', '{}', '[]', 'chat-message', 0, '', '{}', '[]')") \
            == [({"status": "missing"},)]
    finally:
        backend.close()


def test_a_functions_name_changes_with_its_body(monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = function("record_steps")
    assert shipped.name.startswith("vt_record_steps_")
    assert f"CREATE OR REPLACE FUNCTION {shipped.name}(" in shipped.create
    text = shipped.create.replace(shipped.name, "vt_record_steps") + "\n-- a changed body\n"

    class Changed:
        def joinpath(self, name: str) -> Changed:
            return self

        def read_text(self, encoding: str) -> str:
            return text

    monkeypatch.setattr(postgres_db, "files", lambda package: Changed())
    changed = function("record_steps")
    assert changed.name.startswith("vt_record_steps_") and changed.name != shipped.name
    assert f"CREATE OR REPLACE FUNCTION {changed.name}(" in changed.create


def test_a_migration_that_fails_leaves_the_previous_version_whole(postgres_url: str) -> None:
    PostgresBackend(postgres_url).close()
    _rewind(postgres_url)
    with pytest.raises(psycopg.errors.UndefinedTable):
        _migrate(postgres_url, 2, {2: ["ALTER TABLE settings ADD COLUMN half TEXT",
                                       "ALTER TABLE no_such_table ADD COLUMN x TEXT"]})
    with psycopg.connect(postgres_url) as conn:
        columns = {name for (name,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'settings' "
            "AND table_schema = current_schema()")}
        assert "half" not in columns
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (1,)


def test_a_store_of_a_newer_schema_is_refused_unchanged(postgres_url: str) -> None:
    PostgresBackend(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match="newer than this server's"):
        PostgresBackend(postgres_url)
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone() == (
            SCHEMA_VERSION + 1,)


def test_the_url_names_the_pool_size_and_its_password_never_reaches_an_error() -> None:
    assert _split_url("postgresql://u@h/db?pool_max=3&sslmode=disable") == (
        "postgresql://u@h/db?sslmode=disable", 3)
    assert _split_url("postgresql://u@h/db")[1] == 10
    with pytest.raises(ConfigError, match="pool_max"):
        _split_url("postgresql://u@h/db?pool_max=0")
    assert redacted_url("postgresql://u:s3cret@h/db") == "postgresql://***@h/db"


def test_an_unreachable_server_is_a_store_error_naming_no_secret() -> None:
    with pytest.raises(StoreError) as caught:
        # A port nothing listens on; the pool gives up after its wait.
        PostgresBackend("postgresql://u:s3cret@127.0.0.1:9/db?connect_timeout=1")
    assert "s3cret" not in str(caught.value)


def test_every_connection_keeps_the_statement_timeout_its_backend_was_opened_with(
        postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The pool opens connections later, in a background thread (growth, replacement after a
    # restart): a changed module constant must not reach them (one CI run's waiting add
    # failed after 200 ms because another test's patch did).
    backend = PostgresBackend(f"{postgres_url}&pool_max=2")
    monkeypatch.setattr(postgres_store, "STATEMENT_TIMEOUT_MS", 200)
    with backend.pool.connection() as first, backend.pool.connection() as grown:
        timeouts = {conn.execute("SHOW statement_timeout").fetchone()[0]
                    for conn in (first, grown)}
    backend.close()
    assert timeouts == {"30s"}


def test_a_store_of_before_roles_gains_the_audit_log_and_its_tokens_stay_user_tokens(
        postgres_url: str) -> None:
    """The previous version's data: tokens without ``role``, no ``audit_log`` table. Roles
    live in the token's document (absent: ``user``) and the audit log is a new table, so
    opening it changes no schema version."""
    first = PostgresBackend(postgres_url)
    first.port(IdentityStore).create_token(ApiToken(id="tok_1", tenant_id="ten_1",
                                                    user_id="usr_1", token_hash="f" * 64))
    first.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TABLE audit_log")
        conn.execute("UPDATE api_tokens SET doc = doc - 'role'")
    again = PostgresBackend(postgres_url)
    try:
        assert again.schema_version() == SCHEMA_VERSION
        token = again.port(IdentityStore).token_by_hash("f" * 64)
        assert token is not None and token.role is Role.USER
        record = AuditRecord(id="aud_1", tenant_id="ten_1", at=T0, actor="cli ops",
                             action="token.revoke", target="tok_1", outcome="ok")
        again.port(AuditStore).append_audit(record)
        assert again.port(AuditStore).list_audit("ten_1") == [record]
    finally:
        again.close()
