
"""InboxService rules that need the lane runtime: routing of undecided answers to the
parent, the "open ask keeps a process BLOCKED" rule, auto-archive and the housekeeping job.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from tests.gateway.wire import wait_process
from tests.helpers import wait_for
from vancetope_brain.identity import Principal
from vancetope_brain.inbox.service import InboxService
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ChatRole, ProcessStatus, ThinkProcess, new_id, utcnow
from vancetope_brain.models.inbox import ItemStatus, ItemType, NewItem, Outcome
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import LaneStore, SessionStore, UserInboxStore

S = ProcessStatus


def _process(emb, session_id: str, name: str, parent: str | None = None) -> ThinkProcess:
    process = ThinkProcess(id=new_id("proc"), tenant_id="acme", session_id=session_id,
                           user_id="ada", name=name, engine="ford", engine_version="1.0.0",
                           parent_process_id=parent)
    emb.brain.store.port(SessionStore).create_process(process)
    emb.brain.waker.wake("acme", process.id)
    return wait_process(emb, emb.who, process.id, S.IDLE)


def _events(emb, pid: str) -> list[str]:
    return [m.content for m in emb.brain.store.port(LaneStore).chat_history("acme", pid)
            if m.role is ChatRole.EVENT]


def test_an_undecided_answer_keeps_the_asker_blocked_and_reaches_its_parent(embedded):
    emb = embedded
    emb.model = FunctionModel(lambda m, t: "noted")
    session = emb.brain.sessions.create(emb.who, title="undecided")
    # The parent is a top-level chat (ford-chat), so it stays open to hear both events.
    parent = wait_process(emb, emb.who, emb.brain.sessions.create_process(
        emb.who, session.id, "ford", name="parent").id, S.IDLE)
    asker = _process(emb, session.id, "asker", parent=parent.id)
    item, _ = emb.brain.inbox.create("acme", "ada", NewItem(ItemType.APPROVAL, "Ship it?"),
                                     origin_process_id=asker.id,
                                     origin_session_id=session.id)
    emb.brain.sessions.steer(emb.who, asker.id, "status?")  # a turn ends: the ask is open
    wait_process(emb, emb.who, asker.id, S.BLOCKED)
    turns = len(emb.brain.store.port(LaneStore).turn_records("acme", asker.id))

    emb.brain.inbox.answer(emb.who, item.id, Outcome.UNDECIDABLE, reason="no data yet")
    reported = wait_for(lambda: [e for e in _events(emb, parent.id) if item.id in e])
    assert 'type="blocked"' in reported[0] and "no data yet" in reported[0]
    assert f'sourceProcessId="{asker.id}"' in reported[0]
    assert emb.brain.store.port(LaneStore).pending_messages("acme", asker.id) == []
    assert len(emb.brain.store.port(LaneStore).turn_records("acme", asker.id)) == turns
    assert emb.brain.store.port(SessionStore).get_process("acme", asker.id).status is S.BLOCKED


def test_auto_archive_follows_the_users_setting_and_spares_pending(embedded):
    emb = embedded
    brain = emb.brain
    brain.identity.create_user("acme", "cleo", "cleo")
    settings = brain.settings
    settings.set("acme", SettingScope.user("cleo"), "inbox.autoArchiveAfterDays", 2)
    make = [brain.inbox.create("acme", "ada", NewItem(ItemType.OUTPUT_TEXT, f"note {n}",
                                                      assigned_to="cleo"))[0]
            for n in range(3)]
    cleo = Principal("acme", "cleo")
    brain.inbox.dismiss(cleo, make[0].id)
    brain.inbox.dismiss(cleo, make[1].id)
    asked, _ = brain.inbox.create("acme", "ada", NewItem(ItemType.APPROVAL, "Ship it?",
                                                         assigned_to="cleo"))
    brain.inbox.answer(cleo, asked.id, Outcome.UNDECIDABLE, reason="not mine")

    def service(days_later: float) -> InboxService:
        return dataclasses.replace(brain.inbox, base_url="http://x", publish=lambda *a: None,
                                   clock=lambda: utcnow() + timedelta(days=days_later))

    assert service(1).auto_archive() == 0
    assert service(3).auto_archive() == 3  # the ANSWERED ask and the DISMISSED notes
    statuses = {i.id: i.status for i in brain.inbox.list(cleo, statuses=ItemStatus)}
    assert statuses == {make[0].id: ItemStatus.ARCHIVED, make[1].id: ItemStatus.ARCHIVED,
                        make[2].id: ItemStatus.PENDING, asked.id: ItemStatus.ARCHIVED}
    archived = brain.store.port(UserInboxStore).get_inbox_item("acme", make[0].id)
    assert archived.history[-1].by == "system:auto-archive" and archived.archived_at
    service(400).auto_archive()  # PENDING is never archived
    assert brain.store.port(UserInboxStore).get_inbox_item("acme", make[2].id).status is ItemStatus.PENDING
    assert len(brain.store.port(UserInboxStore).get_inbox_item("acme", make[0].id).history) == len(archived.history)
    assert emb.worker_parts.housekeeping() == 0  # the beat job runs both parts without error
