"""Where a webhook may be sent: the SSRF guard.

A destination is an ``http``/``https`` URL without credentials whose host resolves only to
public addresses: loopback, private, link-local, multicast, reserved, unspecified and every
other address that is not globally reachable is refused (IPv4 and IPv6, an IPv4 address
mapped into IPv6 judged as the IPv4 one), unless the operator allows them
(``VANCETOPE_WEBHOOK_ALLOW_PRIVATE``). The check returns the address it judged, and the
sender connects to that address (``WebhookSender``), so a name that resolves elsewhere
the next time (DNS rebinding) cannot slip past it.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from vancetope_brain.errors import DestinationRefused

MAX_URL = 2000
"""Longest subscription URL (characters)."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Destination:
    """A checked URL: its parts, and the address the sender connects to."""

    scheme: str
    host: str
    port: int
    target: str
    """The path and query sent (``/`` at least)."""
    address: IPAddress

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def pinned_url(self) -> str:
        """The URL with the checked address in place of the host name."""
        address = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return f"{self.scheme}://{address}:{self.port}{self.target}"


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` is no public destination, or None when it is one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    for kind in ("loopback", "private", "link_local", "multicast", "reserved", "unspecified"):
        if getattr(address, f"is_{kind}"):
            return kind.replace("_", "-")
    return None if address.is_global else "not-global"


def parse(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path and query) of a webhook URL; ``DestinationRefused`` for a
    malformed one."""
    if len(url) > MAX_URL:
        raise DestinationRefused(f"the webhook URL is longer than {MAX_URL} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise DestinationRefused(f"the webhook URL is malformed: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DestinationRefused("a webhook URL is http:// or https:// with a host")
    if parts.username is not None or parts.password is not None:
        raise DestinationRefused("a webhook URL carries no user name or password; sign with "
                                 "the subscription's secret instead")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), target


def check_destination(url: str, *, allow_private: bool) -> Destination:
    """Parse ``url`` and resolve its host; every address it resolves to must be public (or
    ``allow_private``). Returns the destination pinned to the first address.
    ``DestinationRefused`` otherwise, naming the address and why."""
    scheme, host, port, target = parse(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise DestinationRefused(f"the webhook host {host!r} does not resolve ({e})") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise DestinationRefused(f"the webhook host {host!r} does not resolve")
    if not allow_private:
        for address in addresses:
            if (why := refusal(address)) is not None:
                raise DestinationRefused(
                    f"the webhook host {host!r} resolves to {address}, a {why} address; "
                    f"webhooks go to public addresses only (an operator may allow others: "
                    f"VANCETOPE_WEBHOOK_ALLOW_PRIVATE)")
    return Destination(scheme, host, port, target, addresses[0])
