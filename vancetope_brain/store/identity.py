"""The identity port: tenants, their projects, users and API tokens."""

from __future__ import annotations

from abc import abstractmethod

from vancetope_brain.models import ApiToken, Project, Tenant, User
from vancetope_brain.store.backend import Port


class IdentityStore(Port):
    """Tenants, projects, users and API tokens (stored as hashes only).

    Each call is one atomic write or read. Administration-sized lists come oldest
    first (``createdAt``; equal times keep insertion order). Two calls are system
    queries without a tenant: ``list_tenants`` (administration) and ``token_by_hash``
    (authentication precedes tenancy).
    """

    @abstractmethod
    def create_tenant(self, tenant: Tenant) -> None:
        """Insert a tenant. Raises ``Conflict`` if the id exists."""

    @abstractmethod
    def list_tenants(self) -> list[Tenant]:
        """System query for administration: every tenant, oldest first."""

    @abstractmethod
    def create_project(self, project: Project) -> None:
        """Insert a project. Raises ``Conflict`` if the id exists in the tenant."""

    @abstractmethod
    def get_project(self, tenant_id: str, project_id: str) -> Project:
        """The project. Raises ``NotFound``."""

    @abstractmethod
    def list_projects(self, tenant_id: str) -> list[Project]:
        """The tenant's projects, oldest first."""

    @abstractmethod
    def create_user(self, user: User) -> None:
        """Insert a user. Raises ``Conflict`` if the id exists."""

    @abstractmethod
    def list_users(self, tenant_id: str) -> list[User]:
        """The tenant's users, oldest first."""

    @abstractmethod
    def get_user(self, tenant_id: str, user_id: str) -> User:
        """The user. Raises ``NotFound``."""

    @abstractmethod
    def create_token(self, token: ApiToken) -> None:
        """Insert an API token record (hash only)."""

    @abstractmethod
    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        """The user's tokens (revoked ones included), oldest first."""

    @abstractmethod
    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        """Mark the token revoked; from then on ``token_by_hash`` ignores it. Idempotent.
        Raises ``NotFound``."""

    @abstractmethod
    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        """System query (authentication precedes tenancy): the non-revoked token with this hash."""
