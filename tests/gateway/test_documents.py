"""Knowledge documents end to end (issue 29, item 1): the REST upload on a served gateway, the
ingestion job on the embedded shape's real Celery worker, the chunks in the store's search,
replacement, deletion, the caps' and formats' stable codes, and tenant isolation.
"""

from __future__ import annotations

import http.client
import json

import pytest

from tests.helpers import wait_for
from tests.knowledge.pdfs import text_pdf
from vancetope_brain.identity import Principal
from vancetope_brain.models import Project
from vancetope_brain.models.knowledge import MAX_DOCUMENT_BYTES
from vancetope_brain.services import DocumentFiles
from vancetope_brain.store import DocumentStore, IdentityStore
from vancetope_gateway.docs_client import upload_document
from vancetope_gateway.uploads import UPLOAD_LIMIT, UPLOADS_PER_MINUTE

GUIDE = b"# Install\n\nThe zorbulator needs a flux capacitor.\n\n## Linux\n\nRun apt.\n"


@pytest.fixture(scope="module")
def token(embedded):
    return embedded.brain.identity.issue_token("acme", "ada")


@pytest.fixture(scope="module")
def foreign(embedded):
    """A token of another tenant, with a project named like acme's."""
    identity = embedded.brain.identity
    identity.create_tenant("umbrella", "umbrella")
    identity.create_user("umbrella", "eve", "eve")
    return identity.issue_token("umbrella", "eve")


def upload(host: str, token: str, name: str, data: bytes, project: str = "default",
           media_type: str | None = None) -> tuple[int, dict]:
    return upload_document(f"http://{host}", token, project, name, data, media_type)


def settled(emb, doc_id: str, project: str = "default", tenant: str = "acme"):
    """The document once a worker is done with it (READY or FAILED)."""
    store = emb.brain.store.port(DocumentStore)
    return wait_for(lambda: (d := store.get_document(tenant, project, doc_id)) is not None
                    and d.status.value in ("READY", "FAILED") and d, timeout=30,
                    what=f"document {doc_id} indexed")


def search(emb, text: str, tenant: str = "acme") -> list[str]:
    hits = emb.brain.store.port(DocumentStore).search_chunks(tenant, ["default"], text, 10)
    return [hit.chunk.text for hit in hits]


def test_an_upload_is_indexed_by_a_worker_and_searchable(embedded, served, token):
    status, body = upload(served, token, "guide.md", GUIDE, media_type="text/markdown")
    assert status == 202 and body["changed"] is True
    doc = body["document"]
    assert (doc["status"], doc["format"], doc["version"], doc["size"]) == \
        ("PENDING", "markdown", 1, len(GUIDE))
    assert "tenantId" not in doc
    ready = settled(embedded, doc["id"])
    assert ready.status.value == "READY" and ready.chunk_count == 2
    assert any("flux capacitor" in text for text in search(embedded, "zorbulator capacitor"))
    files = DocumentFiles(embedded.brain.config.attachments_dir)
    assert files.versions("acme", doc["id"]) == [1]


def test_re_adding_replaces_the_chunks_and_the_same_bytes_change_nothing(
        embedded, served, token):
    _, first = upload(served, token, "notes.txt", b"the quokka sleeps at noon\n")
    doc_id = first["document"]["id"]
    settled(embedded, doc_id)
    assert search(embedded, "quokka")

    status, again = upload(served, token, "notes.txt", b"the quokka sleeps at noon\n")
    assert status == 200 and again["changed"] is False
    assert again["document"]["version"] == 1 and again["document"]["status"] == "READY"

    status, changed = upload(served, token, "notes.txt", b"the wombat digs at dawn\n")
    assert status == 202 and changed["document"]["id"] == doc_id
    assert changed["document"]["version"] == 2
    ready = settled(embedded, doc_id)
    assert ready.version == 2 and ready.status.value == "READY"
    assert search(embedded, "quokka") == []
    assert search(embedded, "wombat") == ["the wombat digs at dawn"]
    files = DocumentFiles(embedded.brain.config.attachments_dir)
    assert files.versions("acme", doc_id) == [2]  # the replaced version's bytes are gone


def test_deleting_removes_the_chunks_and_the_bytes(embedded, served, token):
    _, body = upload(served, token, "gone.txt", b"the axolotl regrows limbs\n")
    doc_id = body["document"]["id"]
    settled(embedded, doc_id)
    who = Principal("acme", "ada")
    deleted = embedded.brain.documents.delete(who, "default", doc_id)
    assert deleted.id == doc_id
    assert search(embedded, "axolotl") == []
    assert DocumentFiles(embedded.brain.config.attachments_dir).versions("acme", doc_id) == []
    assert embedded.brain.store.port(DocumentStore).get_document("acme", "default",
                                                                 doc_id) is None


def test_bad_files_are_refused_at_once_with_their_codes(embedded, served, token):
    assert upload(served, token, "photo.png", b"\x89PNG\r\n\x1a\n")[1]["code"] == \
        "unsupported_document"
    status, body = upload(served, token, "fake.pdf", b"not a pdf at all")
    assert (status, body["code"]) == (422, "unreadable_document")
    status, body = upload(served, token, "binary.txt", b"\x00\x01\x02")
    assert (status, body["code"]) == (422, "unreadable_document")
    status, body = upload(served, token, "big.txt", b"a" * (MAX_DOCUMENT_BYTES + 1))
    assert (status, body["code"]) == (413, "document_too_large")
    status, body = upload(served, token, "../escape.txt", b"text")
    assert (status, body["code"]) == (400, "invalid_input")
    status, body = upload(served, token, "empty.txt", b"")
    assert body["code"] == "unreadable_document"
    status, body = upload(served, token, "x.txt", b"text", project="no-such-project")
    assert (status, body["code"]) == (404, "not_found")
    names = {d.name for d in embedded.brain.store.port(DocumentStore).list_documents(
        "acme", "default")}
    assert not names & {"photo.png", "fake.pdf", "binary.txt", "big.txt", "empty.txt"}


def test_an_oversized_body_is_refused_before_it_is_read(served, token):
    """No token is checked and no byte read: the Content-Length alone refuses it."""
    host, port = served.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.putrequest("POST", "/projects/default/documents")
    connection.putheader("Content-Type", "multipart/form-data; boundary=x")
    connection.putheader("Content-Length", str(UPLOAD_LIMIT + 1))
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413
    assert json.loads(response.read())["code"] == "document_too_large"
    connection.close()


def test_other_routes_still_refuse_bodies(served, token):
    host, port = served.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    connection.request("POST", "/sessions", body=b"x" * (300 * 1024),
                       headers={"Authorization": f"Bearer {token}"})
    assert connection.getresponse().status == 413
    connection.close()


def test_a_corrupt_pdf_ends_failed_and_a_good_one_ready(embedded, served, token):
    corrupt = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nendobj\ntrailer\n<<>>\n"
    _, body = upload(served, token, "corrupt.pdf", corrupt)
    failed = settled(embedded, body["document"]["id"])
    assert failed.status.value == "FAILED" and failed.error_code == "unreadable_document"
    assert failed.chunk_count == 0

    _, body = upload(served, token, "manual.pdf", text_pdf([["The gearbox hums."],
                                                            ["Oil it yearly."]]))
    ready = settled(embedded, body["document"]["id"])
    assert (ready.status.value, ready.pages) == ("READY", 2)


def test_a_foreign_tenant_cannot_reach_another_tenants_documents(embedded, served, token,
                                                                 foreign):
    _, body = upload(served, token, "secret.txt", b"the launch code is swordfish\n")
    doc_id = body["document"]["id"]
    settled(embedded, doc_id)
    embedded.brain.store.port(IdentityStore).create_project(
        Project(id="private", tenant_id="acme", name="Private"))
    status, refused = upload(served, foreign, "x.txt", b"mine", project="private")
    assert (status, refused["code"]) == (404, "not_found")
    eve = Principal("umbrella", "eve")
    documents = embedded.brain.documents
    assert doc_id not in {d.id for d in documents.list(eve, "default")}
    for call in (lambda: documents.get(eve, "default", doc_id),
                 lambda: documents.delete(eve, "default", doc_id),
                 lambda: documents.list(eve, "private")):
        with pytest.raises(Exception) as refused_call:
            call()
        assert getattr(refused_call.value, "code", None) == "not_found"
    assert search(embedded, "swordfish", tenant="umbrella") == []
    assert embedded.brain.store.port(DocumentStore).get_document("acme", "default", doc_id)


def test_an_upload_without_a_token_is_unauthorized(served):
    status, body = upload(served, "vt_wrong", "a.txt", b"text")
    assert (status, body["code"]) == (401, "unauthorized")


def test_a_file_larger_than_any_other_body_is_taken(embedded, served, token):
    """Other routes refuse bodies over 256 KiB; the upload takes up to the per-file cap."""
    text = b"".join(b"line %d of the long ledger\n" % i for i in range(20_000))
    assert len(text) > 300 * 1024
    status, body = upload(served, token, "ledger.txt", text)
    assert status == 202
    ready = settled(embedded, body["document"]["id"])
    assert ready.status.value == "READY" and ready.chunk_count > 100


def test_a_user_past_the_uploads_of_a_minute_is_refused_and_others_are_not(embedded, served,
                                                                           foreign):
    identity = embedded.brain.identity
    identity.create_user("acme", "bob", "bob")
    bob = identity.issue_token("acme", "bob")
    statuses = {upload(served, bob, "tool.exe", b"MZ\x90\x00")[0]
                for _ in range(UPLOADS_PER_MINUTE)}
    assert statuses == {415}  # counted, though refused for what they are
    status, body = upload(served, bob, "a.txt", b"one more")
    assert (status, body["code"]) == (429, "rate_limited") and "a minute" in body["message"]
    assert upload(served, foreign, "tool.exe", b"MZ\x90\x00")[0] == 415  # not bob's minute
    stored = embedded.brain.store.port(DocumentStore).list_documents("acme", "default")
    assert "a.txt" not in {doc.name for doc in stored}
