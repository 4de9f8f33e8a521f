"""The Inbox over the protocol (issue 5): every inbox frame's success and refusal, answers of
all eight item types, delegation, LOW auto-answers and their revocation, idempotent create,
the pushes and the pending summary of a reconnecting user.

Items are created the way engines create them (``brain.inbox.create``); their origin is a
real process whose lane receives the answer.
"""

from __future__ import annotations

import contextlib
import urllib.request
from urllib.parse import urlsplit

import pytest

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers, http_get, wait_process
from tests.helpers import wait_for
from vancetope_brain.errors import InvalidInput, NotFound
from vancetope_brain.identity import Principal
from vancetope_brain.models import ChatRole, ProcessStatus
from vancetope_brain.models.inbox import Criticality, ItemType, NewItem
from vancetope_brain.store import DeliveryStore, LaneStore, UserInboxStore

T = ItemType
DECISION = {"options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B"}]}
ORDERING = {"items": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}]}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

# type, payload, a valid DECIDED value, an invalid one and a word of the refusal
ANSWERS = [
    (T.APPROVAL, {}, {"approved": True}, {"approved": "yes"}, "approved"),
    (T.DECISION, DECISION, {"chosen": "b"}, {"chosen": "c"}, "not one of"),
    (T.FEEDBACK, {"maxLength": 5}, {"text": "fine"}, {"text": "too long"}, "5"),
    (T.ORDERING, ORDERING, {"orderedIds": ["y", "x"]}, {"orderedIds": ["x", "x"]}, "x"),
    (T.STRUCTURE_EDIT, {"schema": SCHEMA, "value": {"n": 1}}, {"value": {"n": 2}},
     {"value": {"n": "two"}}, "n"),
]
OUTPUTS = [(T.OUTPUT_TEXT, {}), (T.OUTPUT_IMAGE, {"url": "https://example.com/p.png",
                                                  "mimeType": "image/png"}),
           (T.OUTPUT_DOCUMENT, {"url": "https://example.com/r.pdf",
                                "mimeType": "application/pdf", "sizeBytes": 3,
                                "filename": "r.pdf"})]


@pytest.fixture(scope="module")
def people(embedded):
    """Bob shares Ada's tenant; Eve is of another."""
    identity = embedded.brain.identity
    with contextlib.suppress(Exception):
        identity.create_user("acme", "bob", "bob")
        identity.create_tenant("globex", "globex")
        identity.create_user("globex", "eve", "eve")
    return {"bob": Principal("acme", "bob"), "eve": Principal("globex", "eve")}


@pytest.fixture
def origin(emb, client):
    """A Ford process of a bound session: it asks, and answers reach its lane."""
    client.ok("session-create", title="inbox", onDisconnect="KEEP_OPEN")
    pid = client.ok("process-create", engine="ford", name="asker")["process"]["id"]
    return wait_process(emb, emb.who, pid, ProcessStatus.IDLE)


def _ask(emb, origin, type_=T.APPROVAL, payload=None, **kw):
    item, created = emb.brain.inbox.create(
        "acme", "ada", NewItem(type=type_, title=kw.pop("title", f"{type_.value} please"),
                               payload=payload, **kw),
        origin_process_id=origin.id if origin else None,
        origin_session_id=origin.session_id if origin else None)
    assert created
    return item


def _event_lines(emb, pid: str) -> list[str]:
    return [m.content for m in emb.brain.store.port(LaneStore).chat_history("acme", pid)
            if m.role is ChatRole.EVENT]


# ── answers of every type ────────────────────────────────────────────────────
@covers("inbox-answer", SUCCESS, REFUSAL)
@pytest.mark.parametrize(("type_", "payload", "good", "bad", "word"), ANSWERS,
                         ids=[a[0].value for a in ANSWERS])
def test_each_ask_type_takes_a_valid_answer_and_refuses_an_invalid_one(
        emb, client, origin, type_, payload, good, bad, word):
    item = _ask(emb, origin, type_, payload)
    message = client.refused("inbox-answer", "invalid_input", itemId=item.id,
                             outcome="DECIDED", value=bad)
    assert type_.value in message and word in message
    assert emb.brain.store.port(UserInboxStore).get_inbox_item("acme", item.id).status.value == "PENDING"
    answered = client.ok("inbox-answer", itemId=item.id, outcome="DECIDED", value=good)["item"]
    assert answered["status"] == "ANSWERED" and answered["resolvedBy"] == "USER"
    assert answered["answer"] == {"outcome": "DECIDED", "value": good, "reason": None,
                                  "answeredBy": "ada"}
    # The answer reached the asking process as an InboxAnswer and was drained by a turn.
    lines = wait_for(lambda: [x for x in _event_lines(emb, origin.id) if item.id in x],
                     what="the InboxAnswer in the process's turn")
    assert lines[0].startswith(f'<inbox-answer itemId="{item.id}" type="{type_.value}"')
    assert client.request("inbox-answer", itemId=item.id, outcome="DECIDED",
                                        value=good)["data"]["code"] == "conflict"


@pytest.mark.parametrize(("type_", "payload"), OUTPUTS, ids=[o[0].value for o in OUTPUTS])
def test_outputs_refuse_any_answer_but_can_be_dismissed(emb, client, origin, type_, payload):
    item = _ask(emb, origin, type_, payload)
    assert not item.requires_action
    message = client.refused("inbox-answer", "invalid_input", itemId=item.id,
                             outcome="DECIDED", value={"approved": True})
    assert "take no answer" in message
    assert client.ok("inbox-dismiss", itemId=item.id)["item"]["status"] == "DISMISSED"


def test_insufficient_info_needs_a_reason_and_reaches_no_decision(emb, client, origin):
    item = _ask(emb, origin)
    client.refused("inbox-answer", "invalid_input", itemId=item.id, outcome="UNDECIDABLE")
    answered = client.ok("inbox-answer", itemId=item.id, outcome="INSUFFICIENT_INFO",
                         reason="which budget?")["item"]
    assert answered["answer"]["outcome"] == "INSUFFICIENT_INFO"
    assert answered["resolverReason"] == "INSUFFICIENT_INFO: which budget?"
    # No parent: the process itself hears it, to escalate as it can.
    wait_for(lambda: any("which budget?" in x for x in _event_lines(emb, origin.id)))


# ── the other commands ───────────────────────────────────────────────────────
@covers("inbox-dismiss", SUCCESS, REFUSAL)
def test_dismiss_sends_the_process_a_skip(emb, client, origin):
    item = _ask(emb, origin)
    dismissed = client.ok("inbox-dismiss", itemId=item.id, note="not now")["item"]
    assert (dismissed["status"], dismissed["resolvedBy"]) == ("DISMISSED", "DISMISSED")
    assert dismissed["history"][-1]["note"] == "not now"
    wait_for(lambda: any("dismissed by the user" in x and item.id in x
                         for x in _event_lines(emb, origin.id)))
    client.refused("inbox-dismiss", "conflict", itemId=item.id)
    client.refused("inbox-dismiss", "not_found", itemId="item_nope")


@covers("inbox-archive", SUCCESS, REFUSAL)
def test_archive_only_after_an_answer_and_hidden_by_default(emb, client, origin):
    item = _ask(emb, origin)
    assert "answer or dismiss it first" in client.refused("inbox-archive", "conflict",
                                                          itemId=item.id)
    client.ok("inbox-answer", itemId=item.id, outcome="DECIDED", value={"approved": False})
    archived = client.ok("inbox-archive", itemId=item.id)["item"]
    assert archived["status"] == "ARCHIVED" and archived["archivedAt"]
    assert item.id not in [i["id"] for i in client.ok("inbox-list", limit=200)["items"]]
    assert item.id in [i["id"] for i in client.ok("inbox-list", status=["ARCHIVED"],
                                                  limit=200)["items"]]


@covers("inbox-item", SUCCESS, REFUSAL)
@covers("inbox-list", SUCCESS, REFUSAL)
def test_list_filters_pages_and_item_detail(emb, client, origin):
    made = [_ask(emb, origin, T.FEEDBACK, title=f"filter-{n}", tags=("paging", f"n{n % 2}"),
                 criticality=Criticality.CRITICAL if n == 4 else Criticality.NORMAL)
            for n in range(5)]
    tagged = client.ok("inbox-list", tags=["paging"], limit=2)
    assert [i["title"] for i in tagged["items"]] == ["filter-4", "filter-3"]
    second = client.ok("inbox-list", tags=["paging"], limit=2, cursor=tagged["nextCursor"])
    third = client.ok("inbox-list", tags=["paging"], limit=2, cursor=second["nextCursor"])
    assert [i["title"] for i in second["items"] + third["items"]] == [
        "filter-2", "filter-1", "filter-0"]
    assert third["nextCursor"] is None
    assert [i["title"] for i in client.ok("inbox-list", tags=["paging", "n1"])["items"]] == [
        "filter-3", "filter-1"]
    assert [i["title"] for i in client.ok("inbox-list", tags=["paging"],
                                          criticality=["CRITICAL"])["items"]] == ["filter-4"]
    assert client.ok("inbox-list", tags=["paging"], status=["ANSWERED"])["items"] == []
    assert client.ok("inbox-item", itemId=made[0].id)["item"]["title"] == "filter-0"
    client.refused("inbox-item", "not_found", itemId="item_missing")
    client.refused("inbox-list", "invalid_input", cursor="not-a-cursor")
    client.refused("inbox-list", "invalid_input", limit=0)


@covers("inbox-delegate", SUCCESS, REFUSAL)
def test_delegation_within_the_tenant_routes_the_answer_to_the_origin(emb, client, origin,
                                                                      people):
    item = _ask(emb, origin, T.DECISION, DECISION)
    bob = Client(emb, people["bob"])
    try:
        assert "within a tenant" in client.refused("inbox-delegate", "invalid_input",
                                                   itemId=item.id, toUserId="eve")
        delegated = client.ok("inbox-delegate", itemId=item.id, toUserId="bob",
                              note="you know this")["item"]
        assert delegated["assignedToUserId"] == "bob"
        # Bob is told at once (he is online), and now it is his to answer, not Ada's.
        pushed = wait_for(lambda: [f for f in bob.sock.frames("inbox-item-added")
                                   if f["data"]["item"]["id"] == item.id])
        assert pushed[0]["data"]["item"]["assignedToUserId"] == "bob"
        client.refused("inbox-answer", "conflict", itemId=item.id, outcome="DECIDED",
                       value={"chosen": "a"})
        client.refused("inbox-delegate", "conflict", itemId=item.id, toUserId="ada")
        bob.ok("inbox-answer", itemId=item.id, outcome="DECIDED", value={"chosen": "b"})
    finally:
        bob.close()
    lines = wait_for(lambda: [x for x in _event_lines(emb, origin.id) if item.id in x])
    assert '"chosen": "b"' in lines[0] and '"answeredBy": "bob"' in lines[0]
    history = client.ok("inbox-item", itemId=item.id)["item"]["history"]  # Ada created it
    assert [(h["action"], h["by"], h.get("toUser")) for h in history] == [
        ("CREATE", "ada", "ada"), ("DELEGATE", "ada", "bob"), ("ANSWER", "bob", None)]
    deliveries = emb.brain.store.port(DeliveryStore).list_deliveries("acme", item_id=item.id, user_id="bob")
    assert [(d.channel, d.status.value) for d in deliveries][0] == ("ws", "SENT")


@covers("user-list", SUCCESS, REFUSAL)
def test_user_list_shows_only_the_callers_tenant_without_secrets(emb, client, people):
    identity = emb.brain.identity
    with contextlib.suppress(Exception):
        identity.create_user("acme", "Carol Jones", "usr_carol")
    identity.create_token("acme", "bob", "a secret for bob")
    listed = client.ok("user-list")
    ids = [u["id"] for u in listed["users"]]
    assert {"ada", "bob", "usr_carol"} <= set(ids) and "eve" not in ids
    assert all(set(u) == {"id", "name"} for u in listed["users"])  # never a token
    assert [u["name"] for u in listed["users"] if u["id"] == "usr_carol"] == ["Carol Jones"]
    # Eve, of another tenant, sees hers only — and no query reaches into acme.
    eve = Client(emb, people["eve"])
    try:
        assert [u["id"] for u in eve.ok("user-list")["users"]] == ["eve"]
        assert eve.ok("user-list", query="carol")["users"] == []
        eve.refused("user-list", "invalid_input", cursor="bob")  # acme's id is no cursor here
    finally:
        eve.close()
    assert [u["id"] for u in client.ok("user-list", query="JONES")["users"]] == ["usr_carol"]
    # Paged: one user a page, following nextCursor, gives the whole list once.
    paged, cursor = [], None
    while True:
        page = client.ok("user-list", limit=1, **({"cursor": cursor} if cursor else {}))
        paged += [u["id"] for u in page["users"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert paged == ids
    client.refused("user-list", "invalid_input", limit=0)
    client.refused("user-list", "invalid_input", limit=201)


@covers("inbox-revoke-auto-answer", SUCCESS, REFUSAL)
def test_low_default_is_answered_at_creation_and_revoking_reblocks(emb, client, origin):
    item = _ask(emb, origin, T.APPROVAL, {"default": "yes"}, criticality=Criticality.LOW)
    assert (item.status.value, item.resolved_by.value) == ("ANSWERED", "AUTO_DEFAULT")
    assert item.answer.value == {"approved": True}
    assert item.answer.answered_by == "system:auto-default"
    assert emb.brain.store.port(DeliveryStore).list_deliveries("acme", item_id=item.id) == []  # nobody bothered
    # An open client is told it was answered (an update, not an addition to notice).
    pushed = wait_for(lambda: [f["data"]["item"] for f in client.sock.frames("inbox-item-updated")
                               if f["data"]["item"]["id"] == item.id])
    assert pushed[0]["resolvedBy"] == "AUTO_DEFAULT"
    assert not [f for f in client.sock.frames("inbox-item-added")
                if f["data"]["item"]["id"] == item.id]
    shown = client.ok("inbox-item", itemId=item.id)["item"]
    assert shown["resolvedBy"] == "AUTO_DEFAULT"
    revoked = client.ok("inbox-revoke-auto-answer", itemId=item.id)["item"]
    assert (revoked["status"], revoked["answer"]) == ("PENDING", None)
    assert revoked["history"][-1]["action"] == "REVOKE"
    # The process is told, and with the question open again it ends its turn BLOCKED.
    wait_process(emb, emb.who, origin.id, ProcessStatus.BLOCKED)
    assert any("revoked the automatic answer" in x for x in _event_lines(emb, origin.id))
    client.refused("inbox-revoke-auto-answer", "conflict", itemId=item.id)
    client.ok("inbox-answer", itemId=item.id, outcome="DECIDED", value={"approved": False})
    wait_process(emb, emb.who, origin.id, ProcessStatus.IDLE)


def test_create_validates_and_is_idempotent(emb, origin):
    key = dict(idempotency_key="retry-1")
    first = _ask(emb, origin, T.FEEDBACK, title="once", **key)
    again, created = emb.brain.inbox.create(
        "acme", "ada", NewItem(type=T.FEEDBACK, title="once", **key),
        origin_process_id=origin.id, origin_session_id=origin.session_id)
    assert (again.id, created) == (first.id, False)
    assert [i.id for i in emb.brain.inbox.list(emb.who, tags=()) if i.title == "once"] == [
        first.id]
    with pytest.raises(InvalidInput, match="options"):
        emb.brain.inbox.create("acme", "ada", NewItem(type=T.DECISION, title="x", payload={}))
    with pytest.raises(InvalidInput, match="no user 'eve'"):
        emb.brain.inbox.create("acme", "ada", NewItem(type=T.APPROVAL, title="x",
                                                      assigned_to="eve"))


def test_foreign_items_look_missing(emb, client, origin, people):
    item = _ask(emb, origin)
    for who in people.values():
        intruder = Client(emb, who)
        try:
            for frame, data in [("inbox-item", {}), ("inbox-dismiss", {}),
                                ("inbox-archive", {}), ("inbox-revoke-auto-answer", {}),
                                ("inbox-answer", {"outcome": "DECIDED",
                                                  "value": {"approved": True}}),
                                ("inbox-delegate", {"toUserId": "ada"})]:
                message = intruder.refused(frame, "not_found", itemId=item.id, **data)
                assert message == f"no inbox item {item.id!r}"
            assert intruder.ok("inbox-list")["items"] == [] or all(
                i["id"] != item.id for i in intruder.ok("inbox-list")["items"])
        finally:
            intruder.close()
    with pytest.raises(NotFound):
        emb.brain.inbox.get(people["eve"], item.id)
    assert emb.brain.store.port(UserInboxStore).get_inbox_item("acme", item.id).status.value == "PENDING"


# ── pushes and the pending summary ──────────────────────────────────────────
@covers("inbox-summary", SUCCESS)
def test_inbox_summary_counts_the_pending_items_as_they_are_now(emb, client, origin):
    before = client.ok("inbox-summary")
    item = _ask(emb, origin, criticality=Criticality.CRITICAL)
    now = client.ok("inbox-summary")
    assert now["totalPending"] == before["totalPending"] + 1
    assert now["byCriticality"]["CRITICAL"] == before["byCriticality"]["CRITICAL"] + 1
    client.ok("inbox-answer", itemId=item.id, outcome="DECIDED", value={"approved": True})
    assert client.ok("inbox-summary") == before


def test_an_offline_user_gets_the_pending_summary_on_reconnect(emb, people):
    bob = people["bob"]
    before = Client(emb, bob)
    summary = wait_for(lambda: before.sock.frames("inbox-pending-summary"))[0]["data"]
    before.close()
    assert before.sock.sent[0]["type"] == "welcome"
    assert before.sock.sent[1]["type"] == "inbox-pending-summary"
    made = [emb.brain.inbox.create("acme", "ada", NewItem(
        type=T.APPROVAL, title=f"for bob {c.value}", criticality=c, assigned_to="bob"))[0]
        for c in (Criticality.LOW, Criticality.CRITICAL, Criticality.CRITICAL)]
    assert [d.reason for d in emb.brain.store.port(DeliveryStore).list_deliveries("acme", item_id=made[0].id)
            if d.channel == "ws"] == ["no active WebSocket connection"]
    after = Client(emb, bob)
    try:
        now = wait_for(lambda: after.sock.frames("inbox-pending-summary"))[0]["data"]
    finally:
        after.close()
    assert now["totalPending"] == summary["totalPending"] + 3
    assert now["byCriticality"]["CRITICAL"] == summary["byCriticality"]["CRITICAL"] + 2
    assert now["byCriticality"]["LOW"] == summary["byCriticality"]["LOW"] + 1
    assert now["oldestPendingAt"] <= made[0].created_at.isoformat()


@pytest.mark.parametrize(("mode", "expected"), [
    ("all", ["NORMAL", "CRITICAL"]), ("critical-only", ["CRITICAL"]), ("none", [])])
def test_notify_mode_decides_which_additions_a_connection_is_pushed(emb, people, mode,
                                                                    expected):
    c = Client(emb, people["bob"], notify_mode=mode)
    try:
        wait_for(lambda: c.sock.frames("inbox-pending-summary"))
        titles = {crit: f"{mode} {crit.value}" for crit in (Criticality.NORMAL,
                                                            Criticality.CRITICAL)}
        for crit, title in titles.items():
            emb.brain.inbox.create("acme", "ada", NewItem(type=T.APPROVAL, title=title,
                                                          criticality=crit, assigned_to="bob"))
        marker = emb.brain.inbox.create("acme", "ada", NewItem(
            type=T.APPROVAL, title="marker", criticality=Criticality.CRITICAL,
            assigned_to="bob"))[0]
        emb.brain.inbox.dismiss(people["bob"], marker.id)  # an update always comes through
        wait_for(lambda: any(f["data"]["item"]["id"] == marker.id
                             for f in c.sock.frames("inbox-item-updated")))
        pushed = [f["data"]["item"]["criticality"] for f in c.sock.frames("inbox-item-added")
                  if f["data"]["item"]["title"] in titles.values()]
    finally:
        c.close()
    assert pushed == expected


def test_an_image_output_links_to_its_attachment_through_a_signed_url(emb, client, origin,
                                                                      served):
    png = b"\x89PNG\r\n\x1a\n a plot"
    meta = emb.brain.inbox.attach("acme", png, "plot.png", "image/png")
    item = _ask(emb, origin, T.OUTPUT_IMAGE, {"attachmentId": meta["id"],
                                              "mimeType": "image/png", "caption": "a plot"})
    url = urlsplit(client.ok("inbox-item", itemId=item.id)["item"]["payload"]["url"])
    with urllib.request.urlopen(f"http://{served}{url.path}?{url.query}", timeout=5) as got:
        assert (got.status, got.read(), got.headers["Content-Type"]) == (200, png, "image/png")
    status, body = http_get(f"http://{served}{url.path}?{url.query[:-4]}beef")
    assert (status, body["code"]) == (403, "forbidden")
    with pytest.raises(InvalidInput, match="no attachment 'att_0000000000000000'"):
        _ask(emb, origin, T.OUTPUT_IMAGE, {"attachmentId": "att_0000000000000000",
                                          "mimeType": "image/png"})
