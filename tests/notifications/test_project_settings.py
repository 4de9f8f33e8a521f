"""The project level of the ``notify.*`` settings, end to end: an item posted from a process
in a project is notified with that project's settings (user-interaction.txt §12.3), through
the real InboxService and dispatcher of a gateway's composition root, and sent by the worker's
batch job to a real SMTP server."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from tests.conftest import Embedded
from tests.gateway.wire import wait_process
from tests.notifications.conftest import SmtpServer, running_smtp
from vancetope_brain.llm.testing import FunctionModel
from vancetope_brain.models import ProcessStatus, utcnow
from vancetope_brain.models.inbox import DeliveryStatus, ItemType, NewItem
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store import DeliveryStore


@pytest.fixture(scope="module")
def smtp() -> Iterator[SmtpServer]:
    with running_smtp() as server:
        yield server


@pytest.fixture(scope="module")
def mailing(tmp_path_factory: pytest.TempPathFactory, smtp: SmtpServer):
    """The embedded shape with a real SMTP server configured (NORMAL items wait in a
    five-minute batch) and project ``lab``, whose notify.email.address is set."""
    emb = Embedded(tmp_path_factory.mktemp("mailing"), VANCETOPE_SMTP_HOST="127.0.0.1",
                   VANCETOPE_SMTP_PORT=str(smtp.port), VANCETOPE_SMTP_STARTTLS="false")
    emb.model = FunctionModel(lambda m, t: "unused")
    emb.brain.identity.create_project("acme", "Lab", project_id="lab")
    emb.brain.settings.set("acme", SettingScope.project("lab"), "notify.email.address",
                           "lab-team@example.com")
    yield emb
    emb.stop()


def _email_log(emb, item_id: str) -> tuple[DeliveryStatus, str | None]:
    [email] = [(d.status, d.reason) for d in emb.brain.store.port(DeliveryStore)
               .list_deliveries("acme", item_id=item_id) if d.channel == "email"]
    return email


def test_an_item_from_a_process_in_a_project_uses_the_projects_notify_settings(mailing):
    emb = mailing
    for_project = {}
    for project in ("lab", "default"):
        session = emb.brain.sessions.create(emb.who, project_id=project)
        wait_process(emb, emb.who, session.chat_process_id, ProcessStatus.IDLE)
        item, _ = emb.brain.inbox.create("acme", "ada", NewItem(ItemType.APPROVAL, "Ship it?"),
                                         origin_process_id=session.chat_process_id,
                                         origin_session_id=session.id)
        for_project[project] = _email_log(emb, item.id)
    assert for_project == {"lab": (DeliveryStatus.QUEUED, None),
                           "default": (DeliveryStatus.SKIPPED, "no notify.email.address")}


def test_an_item_from_a_session_without_a_process_uses_the_sessions_project(mailing):
    emb = mailing
    session = emb.brain.sessions.create(emb.who, project_id="lab")
    item, _ = emb.brain.inbox.create("acme", "ada", NewItem(ItemType.OUTPUT_TEXT, "Report"),
                                     origin_session_id=session.id)
    assert _email_log(emb, item.id) == (DeliveryStatus.QUEUED, None)


def test_the_batch_job_mails_a_project_items_to_the_projects_address(mailing, smtp):
    emb = mailing
    session = emb.brain.sessions.create(emb.who, project_id="lab")
    item, _ = emb.brain.inbox.create("acme", "ada", NewItem(ItemType.APPROVAL, "Order reagents?"),
                                     origin_session_id=session.id)
    assert _email_log(emb, item.id) == (DeliveryStatus.QUEUED, None)

    # The beat's housekeeping five minutes later: the batch is due.
    assert emb.worker_parts.notifications.flush(utcnow() + timedelta(seconds=300)) >= 1

    assert _email_log(emb, item.id) == (DeliveryStatus.SENT, None)
    [message] = [m for m in smtp.messages if item.id in str(m.get_content())]
    assert message["To"] == "lab-team@example.com"
