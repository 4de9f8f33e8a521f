"""What names an OpenAI-compatible endpoint without importing the ``openai`` client (its import
costs about a second of CPU, paid only by a process that builds an ``OpenAiChatModel``)."""

from __future__ import annotations

import urllib.parse

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def safe_url(url: str) -> str:
    """``url`` without user info or query string, either of which may hold a secret."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
