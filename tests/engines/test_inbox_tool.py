"""``inbox_post`` inside worker turns: a question blocks the worker until its answer arrives
(the lane's rule, no engine code), a LOW question with a default never blocks, and a retried
post with the same idempotency key creates nothing new. Ford has no ``inbox_post`` of its own
(think-engines §7a): the workers here run a tenant recipe that adds it."""

from __future__ import annotations

import base64
import json

import pytest
import redis

from tests.engines.test_arthur import call, respond, spawn_worker
from tests.helpers import wait_for
from vancetope_brain.events import EventType
from vancetope_brain.llm import LlmResponse
from vancetope_brain.llm.demo_inbox import demo_png
from vancetope_brain.models import ChatRole, CloseReason, ProcessStatus
from vancetope_brain.models.inbox import InboxQuery, Outcome
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import LaneStore, SessionStore, UserInboxStore

S = ProcessStatus
ASKER = """
name: asker
engine: ford
category: worker
description: A worker that may ask the user through the Inbox.
allowedToolsAdd: [inbox_post]
"""


@pytest.fixture(autouse=True)
def asker_recipe(embedded):
    embedded.brain.recipe_admin.put("acme", None, parse_recipe(ASKER, "asker"))
    yield
    embedded.brain.recipe_admin.delete("acme", None, "asker")


def _asking_worker(messages, tools):
    """Posts the question in its goal, then reports what it learnt."""
    last = messages[-1]
    if "<inbox-answer" in last.content:
        return respond("answer: " + last.content.split(">", 1)[1].split("</", 1)[0])
    if last.role == "tool":
        result = json.loads(last.content)["result"]
        return respond(f"posted {result['status']} {json.dumps(result['answer'])}")
    goal = json.loads(next(m.content for m in messages if m.role == "user"))
    return LlmResponse("", (call("inbox_post", **goal),))


def _status_after(emb, pid: str) -> list[S]:
    return [t.status_after for t in emb.brain.store.port(LaneStore).turn_records("acme", pid)]


def test_a_low_question_with_a_default_is_answered_at_once_and_never_blocks(embedded):
    question = {"type": "APPROVAL", "title": "Use the cache?", "criticality": "LOW",
                "payload": {"default": "yes"}}
    _, w = spawn_worker(embedded, _asking_worker, recipe="asker", goal=json.dumps(question))
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status is S.CLOSED,
             timeout=15)
    done = embedded.brain.store.port(SessionStore).get_process("acme", w.id)
    assert done.close_reason is CloseReason.DONE
    assert done.engine_state["lastReply"] == (
        'posted ANSWERED {"outcome": "DECIDED", "value": {"approved": true}, "reason": null, '
        '"answeredBy": "system:auto-default"}')
    assert S.BLOCKED not in _status_after(embedded, w.id)
    [item] = embedded.brain.store.port(UserInboxStore).list_inbox_items("acme", InboxQuery(origin_process_id=w.id))
    assert (item.resolved_by.value, item.status.value) == ("AUTO_DEFAULT", "ANSWERED")


def test_a_question_blocks_the_worker_until_the_answer_arrives(embedded):
    question = {"type": "DECISION", "title": "Which baseline?", "idempotency_key": "q1",
                "payload": {"options": [{"value": "v2017", "label": "Vaswani 2017"},
                                        {"value": "d2019", "label": "Devlin 2019"}]}}
    session, w = spawn_worker(embedded, _asking_worker, recipe="asker", goal=json.dumps(question))
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status is S.BLOCKED,
             timeout=15)
    # It said "posted PENDING" (not awaiting input), yet the lane kept it BLOCKED; and
    # its parent heard about it.
    assert embedded.brain.store.port(SessionStore).get_process("acme", w.id).engine_state["lastReply"] \
        == "posted PENDING null"
    wait_for(lambda: any('type="blocked"' in m.content for m in embedded.brain.store
                         .port(LaneStore).chat_history("acme", session.chat_process_id)
                         if m.role is ChatRole.EVENT), timeout=15)
    [item] = embedded.brain.store.port(UserInboxStore).list_inbox_items("acme", InboxQuery(origin_process_id=w.id))
    # A chat message does not unblock it while the question is open; the model posts the
    # question again with the same key, which gives back the first item.
    embedded.brain.sessions.steer(embedded.who, w.id, "any news?")
    wait_for(lambda: len(_status_after(embedded, w.id)) == 2, timeout=15)
    assert embedded.brain.store.port(SessionStore).get_process("acme", w.id).status is S.BLOCKED
    assert embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id)) == [item]

    embedded.brain.inbox.answer(embedded.who, item.id, Outcome.DECIDED,
                                value={"chosen": "d2019"})
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status is S.CLOSED,
             timeout=15)
    assert '"chosen": "d2019"' in embedded.brain.store.port(SessionStore).get_process(
        "acme", w.id).engine_state["lastReply"]


PNG = base64.b64encode(demo_png()).decode()
IMAGE = {"type": "OUTPUT_IMAGE", "title": "A plot",
         "attachment": {"filename": "plot.png", "mime_type": "image/png",
                        "content_base64": PNG}}


def _image_worker(messages, tools):
    """Posts the image; reports the post (or why not). Any later message: posts it again."""
    last = messages[-1]
    if last.role == "tool":
        return respond(f"posted: {last.content}")
    return LlmResponse("", (call("inbox_post", **IMAGE),))


def _stored_files(emb) -> list[str]:
    folder = emb.brain.attachments._root / "acme"
    return sorted(p.name for p in folder.glob("att_*") if p.suffix != ".json")


def test_an_inline_attachment_is_stored_once_and_shown_as_a_reference(embedded):
    """The image's bytes go to the attachment store; the tool-call-started event, the tool
    line and the model's next step carry its reference (id, name, type, size) instead."""
    files = set(_stored_files(embedded))
    _, w = spawn_worker(embedded, _image_worker, recipe="asker", goal="plot it")
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is S.CLOSED, timeout=15)
    [item] = embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id))
    [new] = set(_stored_files(embedded)) - files
    assert item.payload == {"attachmentId": new, "mimeType": "image/png"}
    reference = {"attachment_id": new, "filename": "plot.png", "mime_type": "image/png",
                 "size_bytes": len(demo_png())}
    [started] = [e.data for e in embedded.brain.events.read(w.session_id, 0)
                 if e.process_id == w.id and e.type is EventType.TOOL_CALL_STARTED]
    assert started["params"]["attachment"] == reference
    [line] = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", w.id)
              if m.role is ChatRole.TOOL]
    assert new in line and PNG not in line and len(line) < 1000
    asked = [c.messages for c in embedded.model.calls
             if any(m.role == "tool" for m in c.messages) and any(
                 t.name == "inbox_post" for t in c.tools)]
    assert asked and all(PNG not in json.dumps([m.content, [tc.arguments for tc in m.tool_calls]])
                         for m in asked[-1])


def test_a_retried_post_stores_its_attachment_once(embedded, monkeypatch):
    """The worker dies inside inbox_post (after the file was stored, before the item): the
    turn is run again from its journal, the call is in doubt and the user approves running it
    again — and the attachment is still stored once, the item naming it."""
    inbox = embedded.worker_parts.inbox
    create = inbox.create
    crashes = []

    def crash_once(*args, **kwargs):
        if not crashes:
            crashes.append(1)
            raise redis.ConnectionError("simulated crash inside inbox_post")
        return create(*args, **kwargs)

    monkeypatch.setattr(inbox, "create", crash_once)
    files = set(_stored_files(embedded))
    _, w = spawn_worker(embedded, _image_worker, recipe="asker", goal="plot it")
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is S.BLOCKED, timeout=15, what="the worker blocked by the in-doubt question")
    [doubt] = embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id))
    assert doubt.tags == ["in-doubt"] and PNG not in (doubt.body or "")
    [stored] = set(_stored_files(embedded)) - files
    embedded.brain.inbox.answer(embedded.who, doubt.id, Outcome.DECIDED,
                                value={"approved": True})
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is S.CLOSED, timeout=15, what="the worker done")
    items = embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id))
    [image] = [i for i in items if i.type.value == "OUTPUT_IMAGE"]
    assert image.payload["attachmentId"] == stored
    assert set(_stored_files(embedded)) - files == {stored}


def test_a_post_run_again_after_a_crash_past_its_item_creates_it_once(embedded, monkeypatch):
    """The worker dies inside inbox_post after the item was written, before the journal
    recorded the result; the model gave no idempotency_key. The user approves running the
    in-doubt call again, and that run gets the first item back (its default key is the
    journaled call's), so there is one item, not two."""
    inbox = embedded.worker_parts.inbox
    create = inbox.create
    crashes = []

    def crash_after_once(*args, **kwargs):
        made = create(*args, **kwargs)
        if not crashes and made[0].type.value == "OUTPUT_IMAGE":
            crashes.append(made[0].id)
            raise redis.ConnectionError("simulated crash after the item was written")
        return made

    monkeypatch.setattr(inbox, "create", crash_after_once)
    assert "idempotency_key" not in IMAGE
    _, w = spawn_worker(embedded, _image_worker, recipe="asker", goal="plot it")
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is S.BLOCKED, timeout=15, what="the worker blocked by the in-doubt question")
    inbox_items = embedded.brain.store.port(UserInboxStore)
    [doubt] = [i for i in inbox_items.list_inbox_items("acme", InboxQuery(origin_process_id=w.id))
               if i.tags == ["in-doubt"]]
    embedded.brain.inbox.answer(embedded.who, doubt.id, Outcome.DECIDED,
                                value={"approved": True})
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is S.CLOSED, timeout=15, what="the worker done")
    items = inbox_items.list_inbox_items("acme", InboxQuery(origin_process_id=w.id))
    assert [i.id for i in items if i.type.value == "OUTPUT_IMAGE"] == crashes
    reported = [m.content for m in embedded.brain.store.port(LaneStore).chat_history("acme", w.id)
                if m.role is ChatRole.TOOL][-1]
    assert crashes[0] in reported and '"created": false' in reported


def test_a_turn_replayed_after_the_post_stores_nothing_again(embedded):
    """The worker dies after the post was journaled, before its turn committed: the next
    attempt replays the completion and the post's recorded result — one item, one file."""
    died = []

    def worker(messages, tools):
        if messages[-1].role == "tool" and not died:
            died.append(1)
            raise redis.ConnectionError("simulated crash after the post")
        return _image_worker(messages, tools)

    files = set(_stored_files(embedded))
    _, w = spawn_worker(embedded, worker, recipe="asker", goal="plot it")
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is S.CLOSED, timeout=15, what="the worker done")
    assert died
    [item] = embedded.brain.store.port(UserInboxStore).list_inbox_items(
        "acme", InboxQuery(origin_process_id=w.id))
    assert set(_stored_files(embedded)) - files == {item.payload["attachmentId"]}
