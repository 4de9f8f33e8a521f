"""Knowledge document frames (issue 29): each frame's success and refusal, on the embedded
shape (its real Celery worker indexes what the service adds)."""

from __future__ import annotations

from tests.gateway.wire import REFUSAL, SUCCESS, Client, covers
from tests.helpers import wait_for
from vancetope_brain.identity import Principal
from vancetope_brain.store import DocumentStore


def _added(emb, name: str, text: bytes) -> dict:
    doc, _ = emb.brain.documents.add(emb.who, "default", name, text, "text/plain")
    return {"id": doc.id, "name": name}


@covers("document-list", SUCCESS, REFUSAL)
def test_document_list_shows_the_projects_documents(emb, client):
    added = _added(emb, "list-me.txt", b"the pangolin curls up\n")
    listed = wait_for(lambda: [d for d in client.ok("document-list", projectId="default")
                               ["documents"] if d["id"] == added["id"]
                               and d["status"] == "READY"], what="list-me.txt READY")
    assert listed[0]["name"] == "list-me.txt" and listed[0]["chunkCount"] == 1
    assert "tenantId" not in listed[0]
    client.refused("document-list", "not_found", projectId="no-such-project")
    client.refused("document-list", "invalid_input")
    emb.brain.identity.create_tenant("initech", "initech")
    emb.brain.identity.create_user("initech", "milton", "milton")
    assert added["id"] not in {d.id for d in emb.brain.documents.list(
        Principal("initech", "milton"), "default")}


@covers("document-get", SUCCESS, REFUSAL)
@covers("document-delete", SUCCESS, REFUSAL)
def test_document_get_and_delete(emb, client):
    added = _added(emb, "get-me.txt", b"the okapi hides in the forest\n")
    ready = wait_for(lambda: (d := client.ok("document-get", projectId="default",
                                             documentId=added["id"])["document"])
                     ["status"] == "READY" and d, what="get-me.txt READY")
    assert (ready["name"], ready["version"], ready["chunkCount"]) == ("get-me.txt", 1, 1)
    client.refused("document-get", "not_found", projectId="default", documentId="doc_missing")
    client.refused("document-get", "not_found", projectId="nope", documentId=added["id"])

    # Another tenant's user sees another tenant's document as missing, and cannot delete it.
    emb.brain.identity.create_tenant("hooli", "hooli")
    emb.brain.identity.create_user("hooli", "gavin", "gavin")
    gavin = Client(emb, Principal("hooli", "gavin"))
    try:
        gavin.refused("document-get", "not_found", projectId="default", documentId=added["id"])
        gavin.refused("document-delete", "not_found", projectId="default",
                      documentId=added["id"])
    finally:
        gavin.close()

    deleted = client.ok("document-delete", projectId="default", documentId=added["id"])
    assert deleted["document"]["id"] == added["id"]
    pushed = wait_for(lambda: client.sock.frames("document-deleted"), what="document-deleted")
    assert pushed[-1]["data"]["document"]["id"] == added["id"]
    client.refused("document-delete", "not_found", projectId="default", documentId=added["id"])
    client.refused("document-get", "not_found", projectId="default", documentId=added["id"])
    hits = emb.brain.store.port(DocumentStore).search_chunks("acme", ["default"], "okapi", 5)
    assert hits == []


def test_status_changes_are_pushed_to_the_users_connections(emb, client):
    added = _added(emb, "pushed.txt", b"the tapir swims\n")
    statuses = wait_for(lambda: "READY" in (s := [
        f["data"]["document"]["status"] for f in client.sock.frames("document-updated")
        if f["data"]["document"]["id"] == added["id"]]) and s, what="a READY push")
    assert statuses[-1] == "READY" and "INDEXING" in statuses
