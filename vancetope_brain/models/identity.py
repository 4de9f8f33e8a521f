"""Tenants, projects, users and API tokens (tokens are stored only as SHA-256 hashes)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow


class Tenant(Document):
    id: str
    name: str
    created_at: datetime = Field(default_factory=utcnow)


class Project(Document):
    """A project of a tenant; sessions live in a project. ``group_id`` optionally groups
    projects (tenant → group → project)."""

    id: str
    tenant_id: str
    name: str
    group_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class User(Document):
    id: str
    tenant_id: str
    name: str
    created_at: datetime = Field(default_factory=utcnow)


class Role(StrEnum):
    """What a token may do besides being its user's (docs/architecture.md, "Roles and the
    admin door"): ``user`` only that; ``operator`` also the ``/admin/`` API for its own
    tenant; ``platform`` the ``/admin/`` API for every tenant (creating tenants too)."""

    USER = "user"
    OPERATOR = "operator"
    PLATFORM = "platform"


class ApiToken(Document):
    """A bearer token. ``token_hash`` is the hex SHA-256 of the secret; the secret is never kept.
    A token stored before roles existed has no ``role`` and loads as a ``user`` token."""

    id: str
    tenant_id: str
    user_id: str
    token_hash: str
    label: str = ""
    role: Role = Role.USER
    revoked: bool = False
    created_at: datetime = Field(default_factory=utcnow)
