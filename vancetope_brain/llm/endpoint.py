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


_NATIVE_HOSTS = ("api.openai.com",)
_NATIVE_SUFFIXES = (".openai.azure.com",)


def native_tool_calls(url: str) -> bool:
    """Whether the endpoint is known to make its models' tool calls natively (OpenAI's and
    Azure's): the default of a profile's ``textToolCalls`` is the opposite. A local server
    (llama.cpp, Ollama, vLLM …) is not: whether a call comes as a call there depends on
    the model and the server's parser, and small models often write it as text."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return host in _NATIVE_HOSTS or host.endswith(_NATIVE_SUFFIXES)
