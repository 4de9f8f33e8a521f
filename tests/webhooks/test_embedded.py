"""The embedded shape (``vancetope serve``: an in-process Celery worker on ``memory://``, no
Redis server) delivers webhooks too: its worker runs the same sweep schedule, which sends
the ``vancetope.webhooks`` task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Embedded
from tests.webhooks.receiver import receiving
from vancetope_brain.models.inbox import ItemType, NewItem
from vancetope_brain.models.webhooks import WebhookEvent


@pytest.fixture(scope="module")
def allowing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    emb = Embedded(tmp_path_factory.mktemp("embedded-hooks"),
                   VANCETOPE_WEBHOOK_ALLOW_PRIVATE="true")
    yield emb
    emb.stop()


def test_the_embedded_worker_delivers_an_inbox_item_created(allowing: Embedded,
                                                             tmp_path: Path) -> None:
    brain = allowing.brain
    with receiving() as receiver:
        sub = brain.webhooks.create(allowing.who, "default", receiver.url,
                                    [WebhookEvent.INBOX_ITEM_CREATED])
        session = brain.sessions.create_interactive(allowing.who, "hooks")
        item, _ = brain.inbox.create("acme", "ada", NewItem(type=ItemType.OUTPUT_TEXT,
                                                            title="the report"),
                                     origin_session_id=session.id)
        [post] = receiver.wait(1)
        payload = receiver.verified(sub.secret, post)
    assert payload["type"] == "inbox.item.created"
    assert payload["data"]["itemId"] == item.id  # type: ignore[index]
