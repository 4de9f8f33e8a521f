"""Issuing and checking API tokens; the local user of the embedded server."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from vancetope_brain.errors import NotFound, Unauthorized
from vancetope_brain.models import ApiToken, Tenant, User, new_id
from vancetope_brain.store import Store

TOKEN_PREFIX = "vt_"


def hash_token(secret: str) -> str:
    """Tokens carry 256 random bits, so a plain SHA-256 is a safe one-way hash."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who a request acts for."""

    tenant_id: str
    user_id: str


class IdentityService:
    def __init__(self, store: Store) -> None:
        self._store = store

    def create_tenant(self, name: str, tenant_id: str | None = None) -> Tenant:
        tenant = Tenant(id=tenant_id or new_id("ten"), name=name)
        self._store.create_tenant(tenant)
        return tenant

    def create_user(self, tenant_id: str, name: str, user_id: str | None = None) -> User:
        user = User(id=user_id or new_id("usr"), tenant_id=tenant_id, name=name)
        self._store.create_user(user)
        return user

    def issue_token(self, tenant_id: str, user_id: str, label: str = "") -> str:
        """Create a token for the user and return its secret (the only time it is visible)."""
        self._store.get_user(tenant_id, user_id)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self._store.create_token(ApiToken(id=new_id("tok"), tenant_id=tenant_id, user_id=user_id,
                                          token_hash=hash_token(secret), label=label))
        return secret

    def authenticate(self, secret: str | None) -> Principal:
        """The principal of a bearer token; raises ``Unauthorized`` for a missing or bad one."""
        if not secret or not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            raise Unauthorized("missing or malformed token")
        digest = hash_token(secret)
        token = self._store.token_by_hash(digest)
        if token is None or not hmac.compare_digest(token.token_hash, digest):
            raise Unauthorized("unknown or revoked token")
        return Principal(token.tenant_id, token.user_id)


LOCAL_TENANT = "local"
LOCAL_USER = "local"


def bootstrap_local(identity: IdentityService, store: Store, token_file: Path) -> tuple[str, bool]:
    """The embedded server's own user: reuse the token in ``token_file`` if it still works,
    else create tenant and user ``local`` (once) and a new token, written with mode 0600.

    Returns (secret, created) — like Jupyter, the server prints how to connect.
    """
    if token_file.exists():
        secret = token_file.read_text().strip()
        try:
            identity.authenticate(secret)
            return secret, False
        except Unauthorized:
            pass
    try:
        store.get_user(LOCAL_TENANT, LOCAL_USER)
    except NotFound:
        identity.create_tenant("local", LOCAL_TENANT)
        identity.create_user(LOCAL_TENANT, "local", LOCAL_USER)
    secret = identity.issue_token(LOCAL_TENANT, LOCAL_USER, label="vancetope serve")
    token_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret, True
