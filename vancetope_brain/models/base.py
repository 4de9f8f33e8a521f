"""The document base class: camelCase on the wire, a schema version, a tenant."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer
from pydantic.alias_generators import to_camel

from vancetope_brain.errors import StoreError


def utcnow() -> datetime:
    """Now, timezone-aware UTC, truncated to milliseconds (what every store keeps)."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def new_id(prefix: str) -> str:
    """A random, URL-safe id with a readable prefix, e.g. ``proc_4f3a…``."""
    return f"{prefix}_{secrets.token_hex(8)}"


class Wire(BaseModel):
    """A model that reads snake_case or camelCase and writes camelCase."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    def dump(self) -> dict[str, Any]:
        """The JSON-ready camelCase form (datetimes as ISO strings)."""
        return self.model_dump(mode="json", by_alias=True)


class Sparse(Wire):
    """A record whose ``OPTIONAL`` keys are absent from its dump until set, as in the plain
    dicts it replaces: there an absent key and a null one differ (``"answer" in item``: the
    item was answered, if with null)."""

    OPTIONAL: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        unset = self.OPTIONAL - self.model_fields_set
        left_out = unset | {type(self).model_fields[name].alias for name in unset}
        return {k: v for k, v in handler(self).items() if k not in left_out}


class Document(Wire):
    """A persisted record. ``SCHEMA_VERSION`` is bumped with every incompatible change.

    Loading an older version goes through ``upgrade`` so checked-in fixtures
    of old records keep loading.
    """

    SCHEMA_VERSION: ClassVar[int] = 1
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    schema_version: int = 1

    @classmethod
    def upgrade(cls, raw: dict[str, Any]) -> dict[str, Any]:
        """Turn an older record into the current shape; the identity for version 1."""
        return raw

    @classmethod
    def load(cls, raw: dict[str, Any]) -> Self:
        """Validate a stored record (any supported schema version)."""
        raw = dict(raw)
        raw.pop("_id", None)
        version = raw.get("schemaVersion", 1)
        if version > cls.SCHEMA_VERSION:
            raise StoreError(
                f"{cls.__name__} record has schemaVersion {version}, newer than this server's "
                f"{cls.SCHEMA_VERSION}; upgrade the server"
            )
        return cls.model_validate(cls.upgrade(raw))
