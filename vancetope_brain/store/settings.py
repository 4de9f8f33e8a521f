"""The settings port: stored values of the settings cascade, per scope."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from vancetope_brain.models.settings import SettingScope
from vancetope_brain.store.backend import Port


class SettingStore(Port):
    """JSON values by key at one scope (tenant, project or user). Each call is one
    atomic write or read; validation is the caller's (``SettingsService``)."""

    @abstractmethod
    def setting_values(self, tenant_id: str, scopes: Sequence[SettingScope],
                       key: str) -> list[Any | None]:
        """The value stored for ``key`` at each of ``scopes`` (None where none is), in one
        read: the cascade's lookup of one key."""

    @abstractmethod
    def cascade_settings(self, tenant_id: str,
                         scopes: Sequence[SettingScope]) -> list[dict[str, Any]]:
        """Every value stored at each of ``scopes``, by key (an empty dict where none is),
        in one read: all a caller resolving many keys over one cascade needs."""

    @abstractmethod
    def set_setting(self, tenant_id: str, scope: SettingScope, key: str, value: Any) -> None:
        """Store (insert or replace) a JSON value, not None; the caller has validated it."""

    @abstractmethod
    def delete_setting(self, tenant_id: str, scope: SettingScope, key: str) -> None:
        """Remove the value stored at this scope. Raises ``NotFound``."""

    @abstractmethod
    def list_settings(self, tenant_id: str, scope: SettingScope) -> dict[str, Any]:
        """The values stored at exactly this scope, by key."""
