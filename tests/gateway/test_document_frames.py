"""Knowledge document frames (issue 29): each frame's success and refusal, on the embedded
shape (its real Celery worker indexes what the service adds)."""

from __future__ import annotations

from tests.gateway.wire import REFUSAL, SUCCESS, covers
from tests.helpers import wait_for
from vancetope_brain.identity import Principal


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
