"""Attachment storage, signed URLs, the secret key and the gateway route (user-interaction §15)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from vancetope_brain.config import Config
from vancetope_brain.errors import ConfigError, Forbidden, InvalidInput, NotFound
from vancetope_brain.inbox.attachments import (
    ATTACHMENT_ID,
    AttachmentStore,
    load_secret,
    safe_filename,
)
from vancetope_gateway.app import close_app, create_app

ROOT = Path(__file__).resolve().parents[2]
SECRET = b"s" * 32
PNG = b"\x89PNG\r\n\x1a\n fake image"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> AttachmentStore:
    return AttachmentStore(tmp_path / "att", SECRET, 300, "https://vt.example/", clock=clock,
                           max_bytes=1024)


def url_parts(url: str) -> tuple[str, str, str, str]:
    """(tenant, id, exp, sig) of a signed URL."""
    parts = urlsplit(url)
    _, _, tenant, attachment_id = parts.path.split("/")
    query = parse_qs(parts.query)
    return tenant, attachment_id, query["exp"][0], query["sig"][0]


def test_put_then_open_through_a_signed_url(store, tmp_path):
    meta = store.put("acme", PNG, "plot.png", "image/png")
    assert meta == {"id": meta["id"], "filename": "plot.png", "mimeType": "image/png",
                    "sizeBytes": len(PNG)}
    assert (tmp_path / "att" / "acme" / meta["id"]).read_bytes() == PNG

    url = store.signed_url("acme", meta["id"])
    assert url.startswith(f"https://vt.example/attachments/acme/{meta['id']}?exp=1000300&sig=")
    path, opened = store.open(*url_parts(url))
    assert path.read_bytes() == PNG
    assert opened == meta


def test_a_keyed_put_stores_once_per_key_and_tenant(store, tmp_path):
    first = store.put("acme", b"one", "a.txt", "text/plain", key="proc_1:k")
    again = store.put("acme", b"one", "a.txt", "text/plain", key="proc_1:k")
    other = store.put("acme", b"one", "a.txt", "text/plain", key="proc_2:k")
    elsewhere = store.put("globex", b"one", "a.txt", "text/plain", key="proc_1:k")
    assert again == first and ATTACHMENT_ID.fullmatch(first["id"])
    assert len({first["id"], other["id"], elsewhere["id"]}) == 3
    assert sorted(p.name for p in (tmp_path / "att" / "acme").iterdir()) == sorted(
        [first["id"], f"{first['id']}.json", other["id"], f"{other['id']}.json"])


def test_put_normalizes_the_mime_type_and_refuses_a_bad_one(store):
    assert store.put("acme", b"x", "a.txt", " Text/Plain ")["mimeType"] == "text/plain"
    with pytest.raises(InvalidInput, match="mimeType 'text' is not a type/subtype"):
        store.put("acme", b"x", "a.txt", "text")


def test_put_refuses_more_than_the_size_limit(store):
    store.put("acme", b"x" * 1024, "max.bin", "application/octet-stream")
    with pytest.raises(InvalidInput, match="attachment is 1025 bytes; at most 1024"):
        store.put("acme", b"x" * 1025, "big.bin", "application/octet-stream")


@pytest.mark.parametrize(("given", "kept"), [
    ("report.pdf", "report.pdf"),
    ("../../etc/passwd", "passwd"),
    ("C:\\Users\\ada\\notes.txt", "notes.txt"),
    ("evil\r\nSet-Cookie: x.txt", "evilSet-Cookie: x.txt"),
    ("..", "attachment"),
    ("", "attachment"),
    (".bashrc", "bashrc"),
    ("ü" * 300, "ü" * 200),
])
def test_filenames_are_sanitized(given, kept):
    assert safe_filename(given) == kept


@pytest.mark.parametrize("tenant", ["..", ".", "a/b", "", "../acme"])
def test_put_refuses_a_tenant_id_that_is_no_plain_id(store, tenant):
    with pytest.raises(InvalidInput, match="invalid tenant id"):
        store.put(tenant, b"x", "a.txt", "text/plain")


def test_a_tampered_signature_is_refused(store):
    tenant, attachment_id, exp, sig = url_parts(
        store.signed_url("acme", store.put("acme", PNG, "p.png", "image/png")["id"]))
    forged = ("0" if sig[0] != "0" else "1") + sig[1:]
    for bad_sig in (forged, "", "ü" * 64):
        with pytest.raises(Forbidden, match="signature is invalid"):
            store.open(tenant, attachment_id, exp, bad_sig)
    with pytest.raises(Forbidden, match="signature is invalid"):
        store.open(tenant, attachment_id, int(exp) + 3600, sig)  # a longer life, same signature
    with pytest.raises(Forbidden, match="exp must be an integer"):
        store.open(tenant, attachment_id, "soon", sig)


def test_another_secret_does_not_accept_the_signature(store, tmp_path, clock):
    url = store.signed_url("acme", store.put("acme", PNG, "p.png", "image/png")["id"])
    other = AttachmentStore(tmp_path / "att", b"t" * 32, 300, "https://vt.example", clock=clock)
    with pytest.raises(Forbidden):
        other.open(*url_parts(url))


def test_a_link_expires_after_its_ttl(store, clock):
    url = store.signed_url("acme", store.put("acme", PNG, "p.png", "image/png")["id"])
    clock.now += 300
    store.open(*url_parts(url))
    clock.now += 1
    with pytest.raises(Forbidden, match="expired"):
        store.open(*url_parts(url))


def test_a_link_of_one_tenant_opens_nothing_of_another(store):
    theirs = store.put("globex", b"secret", "s.txt", "text/plain")
    _, _, exp, sig = url_parts(store.signed_url("acme", theirs["id"]))
    with pytest.raises(NotFound):  # correctly signed for acme, but acme has no such file
        store.open("acme", theirs["id"], exp, sig)
    with pytest.raises(Forbidden):  # acme's signature on globex's path
        store.open("globex", theirs["id"], exp, sig)


@pytest.mark.parametrize(("tenant", "attachment_id"), [
    ("..", "att_0123456789abcdef"),
    ("acme", "../secret.key"),
    ("acme", "att_0123456789abcdef/../../x"),
    ("acme", "att_0123456789ABCDEF"),
    ("acme/..", "att_0123456789abcdef"),
])
def test_traversal_attempts_find_nothing(store, tenant, attachment_id):
    with pytest.raises(NotFound):
        store.open(tenant, attachment_id, "9999999999", "0" * 64)
    with pytest.raises(InvalidInput):
        store.signed_url(tenant, attachment_id)


def test_a_validly_signed_link_to_a_missing_file_is_not_found(store):
    url = store.signed_url("acme", "att_0123456789abcdef")
    with pytest.raises(NotFound, match="no such attachment"):
        store.open(*url_parts(url))


# --- the secret key ------------------------------------------------------------------------


def config(tmp_path: Path, **env: str) -> Config:
    return Config.from_env({"VANCETOPE_DATA_DIR": str(tmp_path / "data"), **env})


def test_the_configured_secret_key_wins(tmp_path):
    assert load_secret(config(tmp_path, VANCETOPE_SECRET_KEY="k" * 40)) == b"k" * 40
    assert not (tmp_path / "data" / "secret.key").exists()


def test_the_secret_file_is_created_once_private_and_reused(tmp_path):
    first = load_secret(config(tmp_path))
    path = tmp_path / "data" / "secret.key"
    assert len(first) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_secret(config(tmp_path)) == first
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret.key"]  # no temp files left


def test_a_truncated_secret_file_is_a_config_error(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret.key").write_bytes(b"short")
    with pytest.raises(ConfigError, match="holds 5 bytes; a secret key needs at least 32"):
        load_secret(config(tmp_path))


RACER = """
import sys, time
from pathlib import Path
from vancetope_brain.config import Config
from vancetope_brain.inbox.attachments import load_secret
while not Path(sys.argv[1]).exists():
    time.sleep(0.001)
print(load_secret(Config.from_env({"VANCETOPE_DATA_DIR": sys.argv[2]})).hex())
"""


def test_processes_racing_to_create_the_secret_agree(tmp_path):
    go, data_dir = tmp_path / "go", tmp_path / "data"
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(go), str(data_dir)],
                               cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(6)]
    time.sleep(0.5)  # let them import, then release them at once
    go.touch()
    keys = {racer.communicate(timeout=60)[0].strip() for racer in racers}
    assert [racer.returncode for racer in racers] == [0] * 6
    assert keys == {(data_dir / "secret.key").read_bytes().hex()}


# --- the gateway route ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def gateway(embedded):
    """The real app on the embedded brain, whose AttachmentStore the route serves."""
    app = create_app(embedded.brain, llm_description="test")
    yield app
    close_app(app)


def _brain(gateway):
    return gateway.extensions["vancetope"]


def fetch(gateway, url: str):
    parts = urlsplit(url)
    return gateway.test_client().get(f"{parts.path}?{parts.query}", buffered=True)


def test_the_route_serves_an_image_inline_and_a_document_as_download(gateway):
    attachments = _brain(gateway).attachments
    image = attachments.put("acme", PNG, "plot.png", "image/png")
    response = fetch(gateway, attachments.signed_url("acme", image["id"]))
    assert response.status_code == 200
    assert response.get_data() == PNG
    assert response.mimetype == "image/png"
    assert response.headers["Content-Disposition"] == "inline; filename=plot.png"
    assert response.headers["X-Content-Type-Options"] == "nosniff"

    document = attachments.put("acme", b"%PDF-1.7", "Q3 report.pdf", "application/pdf")
    response = fetch(gateway, attachments.signed_url("acme", document["id"]))
    assert response.status_code == 200
    assert response.mimetype == "application/pdf"
    assert response.headers["Content-Disposition"] == 'attachment; filename="Q3 report.pdf"'


def test_the_route_refuses_a_bad_signature_with_403(gateway):
    attachments = _brain(gateway).attachments
    url = attachments.signed_url("acme", attachments.put("acme", PNG, "p.png", "image/png")["id"])
    response = fetch(gateway, url[:-4] + "beef")
    assert response.status_code == 403
    assert response.get_json() == {"code": "forbidden",
                                   "message": "attachment link signature is invalid"}
    response = fetch(gateway, url.split("?")[0])
    assert response.status_code == 403


def test_the_route_answers_404_for_a_missing_file(gateway):
    attachments = _brain(gateway).attachments
    response = fetch(gateway, attachments.signed_url("acme", "att_0123456789abcdef"))
    assert response.status_code == 404
    assert response.get_json()["code"] == "not_found"


def test_the_gateway_shares_the_secret_other_processes_load(gateway):
    config = gateway.extensions["vancetope"].config
    secret_file = config.data_dir / "secret.key"
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
    worker_side = AttachmentStore(config.attachments_dir, load_secret(config), 60, "http://x")
    url = worker_side.signed_url("acme", worker_side.put("acme", b"hi", "hi.txt", "text/plain")["id"])
    assert fetch(gateway, url).status_code == 200
