"""Where webhooks may point: http(s), no credentials, and — unless private targets are allowed —
no loopback, private, link-local, multicast or reserved address, however it is written.

``ipaddress.is_global`` is not enough: IPv4-mapped, NAT64 (64:ff9b::/96), 6to4 (2002::/16) and
Teredo (2001::/32) addresses carry an IPv4 address inside, which is decoded and checked too.
A name is blocked when any address it resolves to is blocked. The check runs at registration and
again at send time, where the request then goes to the very address that was checked.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]

MAX_URL_LENGTH = 2048
ALLOW_HINT = "set INBOTS_WEBHOOK_ALLOW_PRIVATE=true on the server to allow private targets"

_BLOCKED_V4 = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_6TO4 = ipaddress.ip_network("2002::/16")


class RejectedURL(ValueError):
    """The URL may not be used; ``str()`` says why (and how to allow private targets)."""

    def __init__(self, message: str, *, reason: str = "blocked_target") -> None:
        super().__init__(message)
        self.reason = reason


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries: mapped, NAT64, 6to4, Teredo."""
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)  # (server, client); the client is already de-obfuscated
    return found


def blocked_reason(ip: IPAddress) -> str | None:
    """Why this address may not be a webhook target, or None if it may."""
    if isinstance(ip, ipaddress.IPv4Address):
        for net in _BLOCKED_V4:
            if ip in net:
                return f"{ip} is in {net}, a non-public range"
        if not ip.is_global:
            return f"{ip} is not a public address"
        return None
    for inner in embedded_ipv4(ip):
        why = blocked_reason(inner)
        if why:
            return f"{ip} carries {inner}: {why}"
    if ip in _NAT64_LOCAL:
        return f"{ip} is a local-use NAT64 address"
    if (
        (
            ip.is_loopback
            or ip.is_link_local
            or ip.is_site_local
            or ip.is_multicast
            or ip.is_unspecified
            or ip.is_reserved
            or ip.is_private
            or not ip.is_global
        )
        and ip not in _6TO4
        and ip not in _NAT64
        and ip.ipv4_mapped is None  # its IPv4, checked above, is what is connected to
    ):
        return f"{ip} is not a public address"
    return None


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True)
class Target:
    """A checked URL and the address the request must go to."""

    url: str
    scheme: str
    host: str
    port: int
    address: str  # the IP to connect to (checked unless private targets are allowed)


def parse(url: str) -> SplitResult:
    """Shape rules only (no DNS): http(s), length, host, no credentials."""
    if not url:
        raise RejectedURL("The webhook URL must be a non-empty string.", reason="invalid")
    if len(url) > MAX_URL_LENGTH:
        raise RejectedURL(
            f"The webhook URL is longer than {MAX_URL_LENGTH} characters.", reason="invalid"
        )
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise RejectedURL(
            "The webhook URL must not contain spaces or control characters.", reason="invalid"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RejectedURL(f"The webhook URL is not valid: {exc}.", reason="invalid") from None
    if parts.scheme not in ("http", "https"):
        raise RejectedURL("The webhook URL must start with http:// or https://.", reason="invalid")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise RejectedURL(
            "The webhook URL must not carry credentials (user:password@); authenticate the "
            "notification by its signature instead.",
            reason="invalid",
        )
    if not parts.hostname:
        raise RejectedURL("The webhook URL has no host.", reason="invalid")
    if port == 0:
        raise RejectedURL("The webhook URL's port must be 1 to 65535.", reason="invalid")
    return parts


def resolve(url: str, allow_private: bool, resolver: Resolver = system_resolver) -> Target:
    """Check ``url`` and pick the address to connect to; raise :class:`RejectedURL` if blocked."""
    parts = parse(url)
    assert parts.hostname
    host = parts.hostname
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [str(literal)]
    else:
        try:
            addresses = resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise RejectedURL(
                f"The webhook host {host!r} could not be resolved ({exc}).", reason="dns"
            ) from None
        if not addresses:
            raise RejectedURL(f"The webhook host {host!r} has no addresses.", reason="dns")
    if not allow_private:
        for address in addresses:
            why = blocked_reason(ipaddress.ip_address(address.split("%", 1)[0]))
            if why:
                raise RejectedURL(
                    f"The webhook URL points into a private or reserved network ({why}); "
                    f"{ALLOW_HINT}."
                )
    return Target(url=url, scheme=parts.scheme, host=host, port=port, address=addresses[0])
