"""Any text a user or a model sends is stored: U+0000 too, which PostgreSQL cannot hold in
``text`` or ``jsonb`` (it keeps U+FFFD there instead of failing the write, which a retry
would only repeat); a backslash typed before ``u0000`` is text like any other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vancetope_brain.store import LaneStore

if TYPE_CHECKING:
    from tests.store_contract.conftest import Storage, World

TYPED = "a\x00b \\u0000 c\\\\\x00"  # NUL, a literal backslash-u0000, a backslash then NUL


def _kept(storage: Storage, text: str) -> str:
    return text.replace("\x00", "\ufffd") if storage.name == "postgres" else text


def test_a_nul_in_a_message_and_a_chat_line_is_stored(storage: Storage, world: World,
                                                       lanes: LaneStore) -> None:
    tenant = world.tenant()
    process = world.process(tenant)
    message = world.append(tenant, process.id, TYPED)
    [pending] = lanes.pending_messages(tenant, process.id)
    assert pending.id == message.id
    assert pending.message.content == _kept(storage, TYPED)  # type: ignore[union-attr]
    epoch = lanes.acquire_epoch(tenant, process.id).epoch
    line = world.line(process, "reply \x00 and \\u0000", source=message.id)
    assert lanes.commit_turn(tenant, process.id, epoch, world.turn(
        process, epoch, drained=[message.id], chat=[line])) is not None
    [stored] = lanes.chat_history(tenant, process.id)
    assert stored.content == _kept(storage, "reply \x00 and \\u0000")
