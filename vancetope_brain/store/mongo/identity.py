"""MongoDB ``IdentityStore``: collections ``tenants``, ``projects``, ``users``, ``api_tokens``.

A project's ``_id`` is ``{tenantId, id}``, since project ids are unique only
within their tenant (every tenant has ``default``). Atomicity: each call is
one single-document operation.
"""

from __future__ import annotations

from pymongo import ASCENDING

from vancetope_brain.errors import NotFound
from vancetope_brain.models import ApiToken, Project, Tenant, User
from vancetope_brain.store.identity import IdentityStore
from vancetope_brain.store.mongo import MongoAdapter, MongoBackend
from vancetope_brain.store.mongo._codec import (
    OLDEST_FIRST,
    from_bson,
    load_one,
    to_bson,
    translated,
)


def _project_key(tenant_id: str, project_id: str) -> dict[str, str]:
    """A project's ``_id``. An embedded document compares field by field in order, so it is
    built here only."""
    return {"tenantId": tenant_id, "id": project_id}


class MongoIdentity(MongoAdapter, IdentityStore):
    def __init__(self, db: MongoBackend) -> None:
        super().__init__(db)
        self._tenants = db.database["tenants"]
        self._projects = db.database["projects"]
        self._users = db.database["users"]
        self._tokens = db.database["api_tokens"]
        self._tokens.create_index("tokenHash", unique=True, name="token_hash")
        self._tokens.create_index(
            [("tenantId", ASCENDING), ("userId", ASCENDING), ("createdAt", ASCENDING)],
            name="by_user")
        self._users.create_index([("tenantId", ASCENDING), ("createdAt", ASCENDING)],
                                 name="by_tenant")
        self._projects.create_index([("tenantId", ASCENDING), ("createdAt", ASCENDING)],
                                    name="by_tenant")

    @translated
    def create_tenant(self, tenant: Tenant) -> None:
        self._tenants.insert_one(to_bson(tenant))

    @translated
    def list_tenants(self) -> list[Tenant]:
        cursor = self._tenants.find({}).sort(OLDEST_FIRST)
        return [from_bson(Tenant, raw) for raw in cursor]

    @translated
    def create_project(self, project: Project) -> None:
        self._projects.insert_one(to_bson(project, _id=_project_key(project.tenant_id,
                                                                    project.id)))

    @translated
    def get_project(self, tenant_id: str, project_id: str) -> Project:
        raw = self._projects.find_one({"_id": _project_key(tenant_id, project_id)})
        return load_one(Project, raw, f"project {project_id} not found")

    @translated
    def list_projects(self, tenant_id: str) -> list[Project]:
        cursor = self._projects.find({"tenantId": tenant_id}).sort(OLDEST_FIRST)
        return [from_bson(Project, raw) for raw in cursor]

    @translated
    def create_user(self, user: User) -> None:
        self._users.insert_one(to_bson(user))

    @translated
    def list_users(self, tenant_id: str) -> list[User]:
        cursor = self._users.find({"tenantId": tenant_id}).sort(OLDEST_FIRST)
        return [from_bson(User, raw) for raw in cursor]

    @translated
    def get_user(self, tenant_id: str, user_id: str) -> User:
        raw = self._users.find_one({"_id": user_id, "tenantId": tenant_id})
        return load_one(User, raw, f"user {user_id} not found")

    @translated
    def create_token(self, token: ApiToken) -> None:
        self._tokens.insert_one(to_bson(token))

    @translated
    def list_tokens(self, tenant_id: str, user_id: str) -> list[ApiToken]:
        cursor = self._tokens.find({"tenantId": tenant_id, "userId": user_id}).sort(OLDEST_FIRST)
        return [from_bson(ApiToken, raw) for raw in cursor]

    @translated
    def revoke_token(self, tenant_id: str, token_id: str) -> None:
        result = self._tokens.update_one({"_id": token_id, "tenantId": tenant_id},
                                         {"$set": {"revoked": True}})
        if result.matched_count == 0:
            raise NotFound(f"token {token_id} not found")

    @translated
    def token_by_hash(self, token_hash: str) -> ApiToken | None:
        raw = self._tokens.find_one({"tokenHash": token_hash, "revoked": False})
        return None if raw is None else from_bson(ApiToken, raw)
