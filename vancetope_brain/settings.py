"""Typed settings with defaults. The tenant → project → user cascade arrives with recipes
(issue 4); until then every scope sees these defaults.
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, Any] = {
    # The engine of the chat process every interactive session starts with.
    "session.defaultChatEngine": "ford",
    # How many chat lines an engine loads as conversation context.
    "chat.historyLimit": 200,
}


class SettingsApi:
    """Read access to settings for one scope."""

    def __init__(self, overrides: dict[str, Any] | None = None) -> None:
        self._values = {**DEFAULTS, **(overrides or {})}

    def get(self, key: str) -> Any:
        """The value; raises KeyError naming the unknown key."""
        try:
            return self._values[key]
        except KeyError:
            raise KeyError(f"unknown setting {key!r}") from None
