"""One POST of a webhook delivery, bounded in every direction.

The URL is checked again at every attempt (``check_destination``: a name may resolve
elsewhere now) and the connection goes to the address that check judged, with the name
kept for the ``Host`` header and TLS (SNI and certificate), so DNS rebinding cannot
redirect it. No redirect is followed (a 3xx is a failed attempt), no proxy from the
environment is used (it would connect elsewhere), the connect and each read are capped by
``timeout`` and the whole attempt by ``total``, and at most ``max_response_bytes`` of
the answer are read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx2

from vancetope_brain.errors import DestinationRefused
from vancetope_brain.webhooks.destinations import check_destination

USER_AGENT = "Vancetope-Webhooks/1"
MAX_RESPONSE_BYTES = 64 * 1024
"""Most bytes of an answer read (the rest is never read; the connection is closed)."""
MAX_ERROR = 300
"""Characters of an error kept in the delivery log."""


@dataclass(frozen=True)
class Outcome:
    """What one attempt got: the status code (None when no answer came), the bytes of the
    answer read (at most the cap), how long it took, and why it failed (None: a 2xx)."""

    status_code: int | None
    duration_ms: int
    error: str | None
    body: bytes = b""


class WebhookSender:
    """Posts signed bodies. ``allow_private``: the operator's ``VANCETOPE_WEBHOOK_ALLOW_PRIVATE``.
    ``timeout``: seconds for the connect and for each read; ``total``: for the whole
    attempt (a server that trickles its answer is cut there)."""

    def __init__(self, *, allow_private: bool = False, timeout: float = 10.0,
                 total: float = 15.0, max_response_bytes: int = MAX_RESPONSE_BYTES) -> None:
        self.allow_private = allow_private
        self._timeout = httpx2.Timeout(timeout, pool=timeout)
        self._total = total
        self._cap = max_response_bytes

    @property
    def longest(self) -> float:
        """The most seconds one attempt takes."""
        return self._total + float(self._timeout.connect or 0)

    def post(self, url: str, headers: dict[str, str], body: bytes) -> Outcome:
        started = time.monotonic()

        def took() -> int:
            return int((time.monotonic() - started) * 1000)

        try:
            destination = check_destination(url, allow_private=self.allow_private)
        except DestinationRefused as e:
            return Outcome(None, took(), str(e)[:MAX_ERROR])
        extensions = {"sni_hostname": destination.host} if destination.scheme == "https" else {}
        sent = {**headers, "host": destination.host_header, "user-agent": USER_AGENT,
                "content-type": "application/json"}
        try:
            with httpx2.Client(follow_redirects=False, timeout=self._timeout,
                               trust_env=False) as client:
                request = client.build_request("POST", destination.pinned_url, headers=sent,
                                               content=body, extensions=extensions)
                response = client.send(request, stream=True)
                try:
                    read = self._read(response, started)
                finally:
                    response.close()
        except httpx2.HTTPError as e:
            return Outcome(None, took(), f"{type(e).__name__}: {e}"[:MAX_ERROR])
        code = response.status_code
        if 200 <= code < 300:
            return Outcome(code, took(), None, read)
        why = "a redirect (not followed)" if 300 <= code < 400 else f"HTTP {code}"
        return Outcome(code, took(), why, read)

    def _read(self, response: httpx2.Response, started: float) -> bytes:
        """At most the cap of the answer, within the attempt's total time."""
        read = bytearray()
        for chunk in response.iter_raw():
            read += chunk
            if len(read) >= self._cap or time.monotonic() - started > self._total:
                break
        return bytes(read[:self._cap])
