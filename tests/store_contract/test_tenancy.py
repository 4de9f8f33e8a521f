"""A foreign tenant's record is indistinguishable from a missing one, for every read and write."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ChatRole, Project, Tenant, User, utcnow
from vancetope_brain.store import Store

if TYPE_CHECKING:
    from .conftest import World


@pytest.fixture
def owned(store: Store, world: World) -> dict[str, str]:
    """Records of tenant ``ten_a`` with a message, a chat line and a turn record each."""
    user = world.user("ten_a")
    session = world.session("ten_a", user)
    process = world.process("ten_a", session.id)
    message = world.append("ten_a", process.id)
    epoch = store.acquire_epoch("ten_a", process.id).epoch
    line = world.line(process, "hi", role=ChatRole.USER, source=message.id)
    assert None is not store.commit_turn("ten_a", process.id, epoch, world.turn(process, epoch, chat=[line]))
    world.append("ten_a", process.id, "still pending")
    return {"user": user, "session": session.id, "process": process.id}


def test_foreign_reads_raise_not_found(store: Store, owned: dict[str, str]) -> None:
    with pytest.raises(NotFound):
        store.get_user("ten_b", owned["user"])
    with pytest.raises(NotFound):
        store.get_session("ten_b", owned["session"])
    with pytest.raises(NotFound):
        store.get_process("ten_b", owned["process"])


def test_foreign_lists_are_empty(store: Store, owned: dict[str, str]) -> None:
    assert store.list_sessions("ten_b", owned["user"]) == []
    assert store.list_processes("ten_b", owned["session"]) == []
    assert store.pending_messages("ten_b", owned["process"]) == []
    assert store.chat_history("ten_b", owned["process"]) == []
    assert store.turn_records("ten_b", owned["process"]) == []


def test_foreign_writes_raise_not_found_and_change_nothing(
    store: Store, world: World, owned: dict[str, str]
) -> None:
    pid = owned["process"]
    process = store.get_process("ten_a", pid)
    pending = store.pending_messages("ten_a", pid)
    with pytest.raises(NotFound):
        store.set_chat_process("ten_b", owned["session"], "proc_x")
    with pytest.raises(NotFound):
        store.acquire_epoch("ten_b", pid)
    with pytest.raises(NotFound):
        store.append_message(world.message("ten_b", pid))
    foreign = process.model_copy(update={"tenant_id": "ten_b"})
    with pytest.raises(NotFound):
        store.commit_turn("ten_b", pid, process.epoch,
                          world.turn(foreign, process.epoch, drained=[pending[0].id]))
    assert store.get_process("ten_a", pid) == process
    assert store.pending_messages("ten_a", pid) == pending
    assert store.get_session("ten_a", owned["session"]).chat_process_id is None
    assert len(store.turn_records("ten_a", pid)) == 1


def test_token_lookup_is_a_system_query_that_names_the_tenant(
    store: Store, world: World
) -> None:
    world.token("ten_a", "f" * 64)
    token = store.token_by_hash("f" * 64)
    assert token is not None and token.tenant_id == "ten_a"


def test_stale_pending_names_the_tenant(store: Store, world: World) -> None:
    process = world.process("ten_a")
    world.append("ten_a", process.id, created_at=utcnow() - timedelta(hours=1))
    assert store.stale_pending(utcnow()) == [("ten_a", process.id)]


def test_a_foreign_project_looks_missing_and_is_never_listed(store: Store) -> None:
    mine = Project(id="prj_1", tenant_id="ten_a", name="Mine")
    store.create_project(mine)
    with pytest.raises(NotFound):
        store.get_project("ten_b", "prj_1")
    assert store.list_projects("ten_b") == []
    assert store.list_projects("ten_a") == [mine]


def test_foreign_users_and_tokens_are_never_listed(store: Store, world: World) -> None:
    store.create_user(User(id="usr_1", tenant_id="ten_a", name="Ada"))
    world.token("ten_a", "7" * 64, user_id="usr_1")
    assert store.list_users("ten_b") == []
    assert store.list_tokens("ten_b", "usr_1") == []
    assert [u.id for u in store.list_users("ten_a")] == ["usr_1"]


def test_revoking_a_foreign_token_is_not_found_and_changes_nothing(
    store: Store, world: World
) -> None:
    token = world.token("ten_a", "8" * 64)
    with pytest.raises(NotFound):
        store.revoke_token("ten_b", token.id)
    assert store.token_by_hash("8" * 64) == token
    assert store.list_tokens("ten_a", token.user_id) == [token]


def test_list_tenants_is_a_system_query_over_every_tenant(store: Store) -> None:
    store.create_tenant(Tenant(id="ten_a", name="Acme"))
    store.create_tenant(Tenant(id="ten_b", name="Globex"))
    assert {t.id for t in store.list_tenants()} == {"ten_a", "ten_b"}
