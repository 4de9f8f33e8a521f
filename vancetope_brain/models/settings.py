"""Where a setting is stored and how the store keeps it: the value types of the settings cascade
(``vancetope_brain.settings`` resolves and validates; ``store.settings`` persists)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import Field

from vancetope_brain.models.base import Document, utcnow


class SettingLevel(StrEnum):
    TENANT = "tenant"
    PROJECT = "project"
    USER = "user"


@dataclass(frozen=True)
class SettingScope:
    """Where a value is stored: the tenant itself (``id`` empty), a project, or a user."""

    level: SettingLevel
    id: str = ""

    @classmethod
    def tenant(cls) -> SettingScope:
        return cls(SettingLevel.TENANT)

    @classmethod
    def project(cls, project_id: str) -> SettingScope:
        return cls(SettingLevel.PROJECT, project_id)

    @classmethod
    def user(cls, user_id: str) -> SettingScope:
        return cls(SettingLevel.USER, user_id)

    def __str__(self) -> str:
        return self.level.value if self.level is SettingLevel.TENANT else \
            f"{self.level.value} {self.id}"


class StoredSetting(Document):
    """One stored value (how the store keeps it; callers see plain values)."""

    tenant_id: str
    level: SettingLevel
    scope_id: str = ""
    key: str
    value: Any
    updated_at: datetime = Field(default_factory=utcnow)
