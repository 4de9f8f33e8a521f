"""Fixtures of the notification tests: a real SQLite store (users ada and bob, projects lab and
field), a settable clock, fakeredis presence and events, and a real SMTP server on loopback
(aiosmtpd)."""

from __future__ import annotations

import contextlib
import email
import email.policy
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import fakeredis
import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from vancetope_brain.config import SmtpConfig
from vancetope_brain.events import EventBus
from vancetope_brain.events.presence import Presence
from vancetope_brain.identity import IdentityService
from vancetope_brain.models import new_id
from vancetope_brain.models.inbox import Criticality, InboxItem, ItemType
from vancetope_brain.models.settings import SettingScope
from vancetope_brain.notifications import NotifyEvent, item_link
from vancetope_brain.settings import SettingsService
from vancetope_brain.store import Backend, IdentityStore, SettingStore, UserInboxStore, open_store

TENANT = "acme"
PROJECTS = ("lab", "field")
BASE_URL = "https://vt.example"
SMTP_USER, SMTP_PASSWORD = "mailer", "pa55-w0rd-SECRET"


class Clock:
    """Now, as the code under test sees it; tests move it instead of sleeping."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 1, 15, 12, 0, tzinfo=UTC))  # a Thursday, noon UTC


@pytest.fixture
def store(tmp_path) -> Iterator[Backend]:
    store = open_store(f"sqlite:///{tmp_path / 'vancetope.db'}")
    identity = IdentityService(store.port(IdentityStore))
    identity.create_tenant(TENANT, TENANT)
    for user in ("ada", "bob"):
        identity.create_user(TENANT, user, user)
    for project in PROJECTS:
        identity.create_project(TENANT, project, project_id=project)
    yield store
    store.close()


@pytest.fixture
def settings(store: Backend) -> SettingsService:
    return SettingsService(store.port(SettingStore), store.port(IdentityStore))


_NAMES = {"email_address": "notify.email.address",
          "min_criticality": "notify.email.minCriticality",
          "batch_interval": "notify.email.batchIntervalSec",
          "quiet_start": "notify.quietHours.start", "quiet_end": "notify.quietHours.end",
          "except_critical": "notify.quietHours.exceptCritical",
          "time_zone": "notify.timeZone"}


def set_user(settings: SettingsService, user: str, **values: Any) -> None:
    """Store settings of a user; ``email_address="x"`` stands for ``notify.email.address``."""
    for name, value in values.items():
        settings.set(TENANT, SettingScope.user(user), _NAMES[name], value)


def set_project(settings: SettingsService, project: str, **values: Any) -> None:
    """Store settings of a project, named as for ``set_user``."""
    for name, value in values.items():
        settings.set(TENANT, SettingScope.project(project), _NAMES[name], value)


def new_item(store: Backend, user: str = "ada",
             criticality: Criticality = Criticality.NORMAL,
             title: str = "Approve the budget", project: str | None = None) -> NotifyEvent:
    """Store an inbox item for ``user`` and return the event announcing it (asked in
    ``project``, when given)."""
    item, _ = store.port(UserInboxStore).create_inbox_item(InboxItem(
        id=new_id("item"), tenant_id=TENANT, originator_user_id=user,
        assigned_to_user_id=user, type=ItemType.APPROVAL, criticality=criticality,
        title=title, body="Details follow."))
    return NotifyEvent(tenant_id=TENANT, user_id=user, item_id=item.id,
                       criticality=criticality, title=item.title, body=item.body,
                       deep_link=item_link(BASE_URL, item.id), item=item.dump(),
                       project_id=project)


@pytest.fixture
def redis_client() -> fakeredis.FakeRedis:
    return fakeredis.FakeRedis()


@pytest.fixture
def presence(redis_client: fakeredis.FakeRedis) -> Presence:
    return Presence(redis_client, ttl=30)


@pytest.fixture
def events(redis_client: fakeredis.FakeRedis) -> EventBus:
    return EventBus(redis_client, max_len=100, ttl=600)


@dataclass
class SmtpServer:
    """A real SMTP server on loopback; ``messages`` are what it accepted, parsed."""

    port: int
    messages: list[EmailMessage] = field(default_factory=list)

    def config(self, **overrides: Any) -> SmtpConfig:
        """A client configuration for this server: plain SMTP, no login, unless told."""
        return replace(SmtpConfig(host="127.0.0.1", port=self.port, starttls=False, user=None,
                                  sender="vancetope@vt.example", timeout=5), **overrides)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content,
                                                      policy=email.policy.default))
        return "250 OK"


def free_port() -> int:
    # aiosmtpd's controller checks readiness by connecting to its port, so it cannot bind 0.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str,
                  auth_data: Any) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and \
        (auth_data.login, auth_data.password) == (SMTP_USER.encode(), SMTP_PASSWORD.encode())
    return AuthResult(success=ok, handled=False)


@contextlib.contextmanager
def running_smtp() -> Iterator[SmtpServer]:
    """An SMTP server that accepts mail without login, and offers AUTH (checked against
    SMTP_USER / SMTP_PASSWORD) without TLS; it does not offer STARTTLS."""
    server = SmtpServer(free_port())
    controller = Controller(server, hostname="127.0.0.1", port=server.port,
                            authenticator=_authenticate, auth_require_tls=False)
    controller.start()
    try:
        yield server
    finally:
        controller.stop()


@pytest.fixture
def smtp_server() -> Iterator[SmtpServer]:
    with running_smtp() as server:
        yield server
