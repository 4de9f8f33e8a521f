"""The published protocol is generated from the frame models and must be current."""

from __future__ import annotations

import shutil
from pathlib import Path

from vancetope_gateway import frames
from vancetope_gateway.protocol import Connection
from vancetope_gateway.schemas import write

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_checked_in_schemas_and_frame_table_are_current(tmp_path):
    copy = tmp_path / "docs"
    shutil.copytree(DOCS, copy)
    for path in write(copy):
        original = DOCS / path.relative_to(copy)
        assert original.exists() and original.read_text() == path.read_text(), \
            f"{original} is stale: run `vancetope schemas`"
    stale = {p.name for p in (DOCS / "schemas").iterdir()} - \
        {p.name for p in (copy / "schemas").iterdir()}
    assert not stale


def test_every_request_has_a_reply_model_and_a_handler():
    assert set(frames.REQUESTS) == set(frames.REPLIES)
    conn = Connection(None, None, None, None, llm="", max_frame_bytes=1)  # type: ignore[arg-type]
    assert set(conn._handlers) == set(frames.REQUESTS)
