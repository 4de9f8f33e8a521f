"""Tenants, projects, users and API tokens: creating, listing, revoking, checking tokens;
the local user of the embedded server."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from vancetope_brain.config import write_private
from vancetope_brain.errors import Conflict, InvalidInput, NotFound, Unauthorized
from vancetope_brain.models import ApiToken, Project, Role, Tenant, User, new_id
from vancetope_brain.store import Backend, IdentityStore

R = TypeVar("R")

TOKEN_PREFIX = "vt_"
DEFAULT_PROJECT = "default"
# Ids end up in URLs, logs and shell commands: keep them plain.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MAX_NAME = 200


def hash_token(secret: str) -> str:
    """Tokens carry 256 random bits, so a plain SHA-256 is a safe one-way hash."""
    return hashlib.sha256(secret.encode()).hexdigest()


def _checked_id(kind: str, value: str | None, prefix: str) -> str:
    """``value`` if it is a valid id, a fresh ``prefix_…`` id if None; else ``InvalidInput``."""
    if value is None:
        return new_id(prefix)
    if not _ID.fullmatch(value):
        raise InvalidInput(f"invalid {kind} id {value!r}: use 1-64 letters, digits, '_', '.' "
                           "or '-', starting with a letter or digit")
    return value


def _checked_text(kind: str, value: str, *, required: bool = True) -> str:
    value = value.strip()
    if required and not value:
        raise InvalidInput(f"{kind} must not be empty")
    if len(value) > _MAX_NAME:
        raise InvalidInput(f"{kind} is longer than {_MAX_NAME} characters")
    return value


@dataclass(frozen=True)
class Principal:
    """Who a request acts for: a user of a tenant, with the role of the token it came with
    (``user`` where no token was involved) and that token's id (None then)."""

    tenant_id: str
    user_id: str
    role: Role = Role.USER
    token_id: str | None = field(default=None, compare=False)

    @property
    def operator(self) -> bool:
        """May use the ``/admin/`` API (for its tenant, or every one if ``platform``)."""
        return self.role is not Role.USER

    def sees(self, tenant_id: str) -> bool:
        """May an operator with this principal act in ``tenant_id``?"""
        return self.role is Role.PLATFORM or (self.role is Role.OPERATOR
                                              and tenant_id == self.tenant_id)


class IdentityService:
    """Administration of identities (bad input raises ``InvalidInput``, an unknown tenant or
    user ``NotFound``, a taken id ``Conflict``, each with a one-line message) and
    authentication."""

    def __init__(self, store: IdentityStore) -> None:
        self._store = store

    @classmethod
    def on(cls, store: Backend) -> IdentityService:
        return cls(store.port(IdentityStore))

    # ── tenants and projects ──────────────────────────────────────────────
    def create_tenant(self, name: str, tenant_id: str | None = None) -> Tenant:
        """Create a tenant with its ``default`` project (where sessions go unless told).

        The project is written first, so a tenant never exists without it; a
        crash in between leaves only an orphan project that a retry adopts.
        """
        tenant = Tenant(id=_checked_id("tenant", tenant_id, "ten"),
                        name=_checked_text("tenant name", name))
        with contextlib.suppress(Conflict):
            self._store.create_project(Project(id=DEFAULT_PROJECT, tenant_id=tenant.id,
                                               name=DEFAULT_PROJECT, created_at=tenant.created_at))
        _insert(self._store.create_tenant, tenant, f"tenant {tenant.id} already exists")
        return tenant

    def list_tenants(self) -> list[Tenant]:
        return self._store.list_tenants()

    def require_tenant(self, tenant_id: str) -> Tenant:
        """The tenant; raises ``NotFound``. (A scan of every tenant: administration only.)"""
        for tenant in self._store.list_tenants():
            if tenant.id == tenant_id:
                return tenant
        raise NotFound(f"tenant {tenant_id} not found")

    def create_project(self, tenant_id: str, name: str, project_id: str | None = None,
                       group_id: str | None = None) -> Project:
        project = Project(
            id=_checked_id("project", project_id, "prj"), tenant_id=tenant_id,
            name=_checked_text("project name", name),
            group_id=None if group_id is None else _checked_id("group", group_id, "grp"),
        )
        self.require_tenant(tenant_id)
        _insert(self._store.create_project, project,
                f"project {project.id} already exists in tenant {tenant_id}")
        return project

    def list_projects(self, tenant_id: str) -> list[Project]:
        self.require_tenant(tenant_id)
        return self._store.list_projects(tenant_id)

    # ── users ─────────────────────────────────────────────────────────────
    def create_user(self, tenant_id: str, name: str, user_id: str | None = None) -> User:
        """Create a user of an existing tenant. User ids are unique across tenants."""
        user = User(id=_checked_id("user", user_id, "usr"), tenant_id=tenant_id,
                    name=_checked_text("user name", name))
        self.require_tenant(tenant_id)
        _insert(self._store.create_user, user, f"user id {user.id} is taken")
        return user

    def list_users(self, tenant_id: str) -> list[User]:
        self.require_tenant(tenant_id)
        return self._store.list_users(tenant_id)

    # ── tokens ────────────────────────────────────────────────────────────
    def create_token(self, tenant_id: str, user_id: str, label: str = "",
                     role: Role | str = Role.USER) -> tuple[ApiToken, str]:
        """Create a token for the user: its record (id, no secret) and its secret, which is
        visible only here and never again. ``role``: ``user``, ``operator`` (of the tenant)
        or ``platform`` (an operator of every tenant)."""
        label = _checked_text("token label", label, required=False)
        try:
            role = Role(role)
        except ValueError:
            raise InvalidInput(f"invalid role {role!r}: use one of "
                               f"{', '.join(Role)}") from None
        self.require_tenant(tenant_id)
        self._store.get_user(tenant_id, user_id)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = ApiToken(id=new_id("tok"), tenant_id=tenant_id, user_id=user_id,
                         token_hash=hash_token(secret), label=label, role=role)
        self._store.create_token(token)
        return token, secret

    def issue_token(self, tenant_id: str, user_id: str, label: str = "") -> str:
        """Create a token for the user and return its secret (the only time it is visible)."""
        return self.create_token(tenant_id, user_id, label)[1]

    def require_user(self, tenant_id: str, user_id: str) -> User:
        """The user; ``NotFound`` if the tenant has none of that id."""
        return self._store.get_user(tenant_id, user_id)

    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        """The user's tokens, revoked ones included (records hold hashes, never secrets)."""
        self.require_tenant(tenant_id)
        self._store.get_user(tenant_id, user_id)
        return self._store.list_tokens(tenant_id, user_id)

    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        """From now on the token authenticates nobody. Idempotent; raises ``NotFound``."""
        self._store.revoke_token(tenant_id, token_id)

    def authenticate(self, secret: str | None) -> Principal:
        """The principal of a bearer token; raises ``Unauthorized`` for a missing or bad one."""
        if not secret or not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
            raise Unauthorized("missing or malformed token")
        principal = self.holder(hash_token(secret))
        if principal is None:
            raise Unauthorized("unknown or revoked token")
        return principal

    def holder(self, token_hash: str) -> Principal | None:
        """Who the token with this hash authenticates now; None once it is revoked (or
        never existed). One store read: gateways call it to re-check open sockets."""
        token = self._store.token_by_hash(token_hash)
        if token is None or not hmac.compare_digest(token.token_hash, token_hash):
            return None
        return Principal(token.tenant_id, token.user_id, token.role, token.id)

    # ── the embedded server ──────────────────────────────────────────────
    def bootstrap_local(self, token_file: Path, *,
                        on_new_project: Callable[[str, str, str], object] | None = None
                        ) -> tuple[str, bool]:
        """The embedded server's own user: reuse the token in ``token_file`` if it still works,
        else create tenant and user ``local`` (once) and a new token, written with mode 0600.

        Also gives a ``local`` tenant made before projects existed its ``default`` project.
        ``on_new_project(tenant, project, user)`` runs when this call created that project
        (``vancetope serve`` seeds its sample document there).
        Returns (secret, created) — like Jupyter, the server prints how to connect.
        """
        new_project = False
        try:
            self._store.get_user(LOCAL_TENANT, LOCAL_USER)
        except NotFound:
            with contextlib.suppress(Conflict):
                self.create_tenant("local", LOCAL_TENANT)
                new_project = True
            self.create_user(LOCAL_TENANT, "local", LOCAL_USER)
        try:
            self._store.get_project(LOCAL_TENANT, DEFAULT_PROJECT)
        except NotFound:
            self.create_project(LOCAL_TENANT, DEFAULT_PROJECT, DEFAULT_PROJECT)
            new_project = True
        if new_project and on_new_project is not None:
            on_new_project(LOCAL_TENANT, DEFAULT_PROJECT, LOCAL_USER)
        if token_file.exists():
            secret = token_file.read_text().strip()
            try:
                self.authenticate(secret)
                return secret, False
            except Unauthorized:
                pass
        secret = self.issue_token(LOCAL_TENANT, LOCAL_USER, label="vancetope serve")
        write_private(token_file, secret + "\n")
        return secret, True


LOCAL_TENANT = "local"
LOCAL_USER = "local"


def _insert(create: Callable[[R], None], record: R, taken: str) -> None:
    """Insert a new record; a taken id is a ``Conflict`` saying so in the admin's words."""
    try:
        create(record)
    except Conflict as e:
        raise Conflict(taken) from e
