"""SQLite: every table is a kind of record with exactly the kind's columns, or holds what the
adapters derive from records (and the transfer adapter rebuilds on import), so a table or
column added without its place in the record form fails here."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from vancetope_brain.store.sqlite import SqliteBackend
from vancetope_brain.store.transfer import KINDS

DERIVED_TABLES = {"schema_version", "knowledge_fts", "knowledge_terms", "memory_terms",
                  "memory_scopes", "conversation_fts", "conversation_fts_built"}
"""Rebuilt, not exported (FTS5's shadow tables, ``<index>_data`` and so on, go with their
index)."""
DERIVED_COLUMNS = {"memory_entries": {"created_ms"}}


def test_every_sqlite_table_is_a_kind_or_derived(tmp_path: Path) -> None:
    path = tmp_path / "vancetope.db"
    SqliteBackend(path).close()
    with sqlite3.connect(path) as conn:
        tables = {name: [row[1] for row in conn.execute(f"PRAGMA table_info({name})")]
                  for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = "
                                              "'table' AND name NOT LIKE 'sqlite_%'")}
    conn.close()
    kinds = {kind.name: kind for kind in KINDS}
    for name, columns in tables.items():
        if name in kinds:
            assert set(columns) == set(kinds[name].columns) | DERIVED_COLUMNS.get(name, set()), \
                name
        else:
            assert name in DERIVED_TABLES or name.rsplit("_", 1)[0] in DERIVED_TABLES, name
    assert set(kinds) <= set(tables)
