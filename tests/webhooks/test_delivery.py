"""Deliveries end to end in one process: the emitter, the dispatcher and the sender against a
real HTTP receiver on loopback, the signatures checked by the Standard Webhooks library;
retries, the dead letter and a manual redelivery; the SSRF guard, redirects and the cap on
what is read."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.webhooks.receiver import Receiver, receiving
from vancetope_brain.errors import Conflict, DestinationRefused
from vancetope_brain.identity import Principal
from vancetope_brain.models import OutboxEvent, ThinkProcess, utcnow
from vancetope_brain.models.webhooks import WebhookDeliveryStatus, WebhookEvent
from vancetope_brain.store import Backend, SessionStore, WebhookStore
from vancetope_brain.webhooks import (
    WebhookDispatcher,
    WebhookEmitter,
    WebhookSender,
    WebhookService,
)
from vancetope_brain.webhooks.sender import MAX_RESPONSE_BYTES

ADA = Principal("acme", "ada")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as r:
        yield r


def _parts(store: Backend, *, allow_private: bool = True, schedule: tuple[float, ...] = (0,),
           ) -> tuple[WebhookService, WebhookEmitter, WebhookDispatcher]:
    webhooks = store.port(WebhookStore)
    from vancetope_brain.store import IdentityStore
    service = WebhookService(webhooks, store.port(IdentityStore), allow_private=allow_private)
    emitter = WebhookEmitter(webhooks, store.port(SessionStore))
    sender = WebhookSender(allow_private=allow_private, timeout=5, total=5)
    return service, emitter, WebhookDispatcher(webhooks, sender, schedule=schedule)


def _closed(store: Backend, reason: str = "DONE") -> OutboxEvent:
    process = ThinkProcess(id="proc_1", tenant_id="acme", session_id="ses_1", project_id="p1",
                           user_id="ada", engine="ford", engine_version="1.0", name="analyze")
    store.port(SessionStore).create_process(process)
    return OutboxEvent(id="proc_1:3:1", tenant_id="acme", session_id="ses_1",
                       process_id="proc_1", epoch=3, index=1, type="status-changed",
                       data={"from": "RUNNING", "to": "CLOSED", "reason": reason},
                       created_at=utcnow())


def test_a_process_done_reaches_the_receiver_signed_once(acme_store: Backend,
                                                          receiver: Receiver) -> None:
    service, emitter, dispatcher = _parts(acme_store)
    sub = service.create(ADA, "p1", receiver.url, [WebhookEvent.PROCESS_DONE])
    other = service.create(ADA, "p1", receiver.url, [WebhookEvent.PROCESS_FAILED])
    event = _closed(acme_store)
    emitter.on_outbox("acme", [event])
    emitter.on_outbox("acme", [event])  # a publisher that died before removing the row
    assert dispatcher.deliver_due() == 1
    [post] = receiver.wait(1)
    payload: Any = receiver.verified(sub.secret, post)
    assert payload["type"] == "process.done"
    assert payload["data"] == {"processId": "proc_1", "sessionId": "ses_1", "engine": "ford",
                               "status": "CLOSED", "closeReason": "DONE", "projectId": "p1"}
    [delivery] = service.deliveries(ADA, sub.id)
    assert post.headers["webhook-id"] == delivery.id
    assert delivery.status is WebhookDeliveryStatus.DELIVERED
    assert delivery.attempts[0].status_code == 204 and delivery.attempts[0].error is None
    assert service.deliveries(ADA, other.id) == []
    with pytest.raises(Exception, match="signature"):
        receiver.verified(service.rotate_secret(ADA, sub.id).secret, post)


def test_a_failing_receiver_gets_every_retry_then_a_dead_letter_then_a_redelivery(
    acme_store: Backend, receiver: Receiver,
) -> None:
    service, emitter, dispatcher = _parts(acme_store, schedule=(0, 0, 0))
    sub = service.create(ADA, "p1", receiver.url, [WebhookEvent.PROCESS_FAILED])
    receiver.status = 500
    emitter.on_outbox("acme", [_closed(acme_store, "FAILED")])
    assert dispatcher.deliver_due() == 3
    [dead] = service.deliveries(ADA, sub.id)
    assert dead.status is WebhookDeliveryStatus.DEAD and dead.tries == 3
    assert [(a.status_code, a.error) for a in dead.attempts] == [(500, "HTTP 500")] * 3
    assert dispatcher.deliver_due() == 0  # dead: nothing more on its own
    receiver.status = 200
    service.redeliver(ADA, dead.id)
    with pytest.raises(Conflict):
        service.redeliver(ADA, dead.id)  # pending already
    assert dispatcher.deliver_due() == 1
    posts = receiver.wait(4)
    assert {p.headers["webhook-id"] for p in posts} == {dead.id}
    assert all(receiver.verified(sub.secret, p)["type"] == "process.failed" for p in posts)
    [done] = service.deliveries(ADA, sub.id)
    assert done.status is WebhookDeliveryStatus.DELIVERED and len(done.attempts) == 4


def test_a_retry_waits_for_its_place_in_the_schedule(acme_store: Backend,
                                                     receiver: Receiver) -> None:
    service, emitter, dispatcher = _parts(acme_store, schedule=(0, 3600))
    sub = service.create(ADA, "p1", receiver.url, [WebhookEvent.PROCESS_DONE])
    receiver.status = 503
    emitter.on_outbox("acme", [_closed(acme_store)])
    assert dispatcher.deliver_due() == 1
    [waiting] = service.deliveries(ADA, sub.id)
    assert waiting.status is WebhookDeliveryStatus.PENDING and waiting.tries == 1
    assert 3590 < (waiting.next_at - utcnow()).total_seconds() <= 3600
    assert dispatcher.deliver_due() == 0


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/hook", "http://10.1.2.3/hook", "http://192.168.0.9/", "http://172.16.0.1/",
    "http://169.254.169.254/latest/meta-data/", "http://[::1]/hook", "http://[fe80::1]/",
    "http://[fc00::1]/", "http://[::ffff:127.0.0.1]/", "http://[::ffff:10.0.0.1]/",
    "http://0.0.0.0/", "http://224.0.0.1/", "http://240.0.0.1/", "http://100.64.0.1/",
    "http://localhost:8080/hook",
])
def test_a_destination_that_is_not_public_is_refused_unless_allowed(acme_store: Backend,
                                                                     url: str) -> None:
    refusing, _, _ = _parts(acme_store, allow_private=False)
    with pytest.raises(DestinationRefused, match="public addresses only"):
        refusing.create(ADA, "p1", url, [WebhookEvent.PROCESS_DONE])
    allowing, _, _ = _parts(acme_store, allow_private=True)
    assert allowing.create(ADA, "p1", url, [WebhookEvent.PROCESS_DONE]).url == url


@pytest.mark.parametrize("url", ["ftp://example.com/", "http://user:pw@example.com/",
                                 "https:///nohost", "http://example.com:99999/"])
def test_a_malformed_url_is_refused(acme_store: Backend, url: str) -> None:
    service, _, _ = _parts(acme_store)
    with pytest.raises(DestinationRefused):
        service.create(ADA, "p1", url, [WebhookEvent.PROCESS_DONE])


def test_the_sender_checks_again_at_each_attempt(acme_store: Backend,
                                                 receiver: Receiver) -> None:
    allowing, emitter, _ = _parts(acme_store, allow_private=True)
    sub = allowing.create(ADA, "p1", receiver.url, [WebhookEvent.PROCESS_DONE])
    _, _, refusing = _parts(acme_store, allow_private=False)
    emitter.on_outbox("acme", [_closed(acme_store)])
    assert refusing.deliver_due() == 1
    [delivery] = allowing.deliveries(ADA, sub.id)
    assert delivery.attempts[0].status_code is None
    assert "loopback" in (delivery.attempts[0].error or "") and receiver.posts == []


def test_the_sender_connects_to_the_address_it_checked(receiver: Receiver,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A name is resolved once per attempt, by the check; the connection goes to that
    address with the name as Host, so a second answer of the DNS (rebinding) is never
    asked for."""
    real, asked = socket.getaddrinfo, []

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        if host != "rebind.example":
            return real(host, *args, **kwargs)
        asked.append(host)  # the first answer is the checked one; a second would be evil
        address = "127.0.0.1" if len(asked) == 1 else "10.9.9.9"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, receiver.port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    outcome = WebhookSender(allow_private=True, timeout=5).post(
        f"http://rebind.example:{receiver.port}/hook", {}, b"{}")
    assert outcome.error is None and asked == ["rebind.example"]
    [post] = receiver.wait(1)
    assert post.headers["host"] == f"rebind.example:{receiver.port}"


def test_a_redirect_is_not_followed(receiver: Receiver) -> None:
    with receiving() as elsewhere:
        receiver.status, receiver.location = 307, elsewhere.url
        outcome = WebhookSender(allow_private=True, timeout=5).post(receiver.url, {}, b"{}")
        assert (outcome.status_code, outcome.error) == (307, "a redirect (not followed)")
        assert len(receiver.posts) == 1 and elsewhere.posts == []


def test_a_huge_answer_is_read_only_up_to_the_cap(receiver: Receiver) -> None:
    receiver.status, receiver.reply_bytes = 200, 20 * MAX_RESPONSE_BYTES
    outcome = WebhookSender(allow_private=True, timeout=5).post(receiver.url, {}, b"{}")
    assert outcome.error is None and len(outcome.body) == MAX_RESPONSE_BYTES


def test_an_unreachable_receiver_is_a_failed_attempt_with_its_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: the connect is refused
        outcome = WebhookSender(allow_private=True, timeout=5).post(
            f"http://127.0.0.1:{port}/", {}, b"{}")
    assert outcome.status_code is None and "ConnectError" in (outcome.error or "")


def test_subscriptions_are_capped_and_scoped_to_their_owner(acme_store: Backend) -> None:
    service, _, _ = _parts(acme_store)
    sub = service.create(ADA, "p1", "http://127.0.0.1/", [WebhookEvent.PROCESS_DONE])
    bob, operator = Principal("acme", "bob"), Principal("acme", "ops", role=_operator())
    assert service.list(bob) == [] and [s.id for s in service.list(operator)] == [sub.id]
    from vancetope_brain.errors import NotFound
    for foreign in (bob, Principal("globex", "ada")):
        with pytest.raises(NotFound):
            service.get(foreign, sub.id)
        with pytest.raises(NotFound):
            service.delete(foreign, sub.id)
    for _ in range(19):
        service.create(ADA, "p1", "http://127.0.0.1/", [WebhookEvent.PROCESS_DONE])
    from vancetope_brain.errors import LimitExceeded
    with pytest.raises(LimitExceeded):
        service.create(ADA, "p1", "http://127.0.0.1/", [WebhookEvent.PROCESS_DONE])


def _operator() -> Any:
    from vancetope_brain.models import Role
    return Role.OPERATOR


def test_https_to_the_checked_address_keeps_the_name_for_tls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinned to the checked address, a TLS connection still names the host (SNI) and checks
    the certificate against it: a certificate nobody vouches for is a failed attempt."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=hooks.example", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept() -> None:
        conn, _ = listener.accept()
        with contextlib.suppress(ssl.SSLError, OSError):
            context.wrap_socket(conn, server_side=True).close()
        conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: real(
        "127.0.0.1" if host == "hooks.example" else host, *a, **k))
    outcome = WebhookSender(allow_private=True, timeout=5).post(
        f"https://hooks.example:{port}/hook", {}, b"{}")
    thread.join(10)
    listener.close()
    assert names == ["hooks.example"]
    assert outcome.status_code is None and "CERTIFICATE_VERIFY_FAILED" in (outcome.error or "")
