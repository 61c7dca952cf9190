"""Where a webhook may point: the shape rules, and — unless private targets are allowed — no
loopback, private, link-local, multicast or reserved address, however it is written."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import pytest
from pydantic import ValidationError

from inbots.agents.schemas import AgentCreate
from inbots.alerts.schemas import AlertWebhookSet
from inbots.webhooks.schemas import WebhookSet
from inbots.webhooks.url_policy import RejectedURL, blocked_reason, resolve, system_resolver


def no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"an IP literal must not be resolved (asked for {host}:{port})")


def fake_resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    asked: list[tuple[str, int]] = []

    def resolver(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return list(table[host])

    resolver.asked = asked  # type: ignore[attr-defined]
    return resolver


def host_of(url: str) -> str:
    host = urlsplit(url).hostname
    assert host
    return host


# (url, why it is blocked) — every host here is an IP literal.
BLOCKED_LITERALS = [
    ("http://[::ffff:127.0.0.1]/", "IPv4-mapped loopback"),
    ("http://[::ffff:a9fe:a9fe]/", "IPv4-mapped link-local (metadata)"),
    ("http://[64:ff9b::a9fe:a9fe]/", "NAT64 carrying the metadata address"),
    ("http://[64:ff9b::a00:1]/", "NAT64 carrying 10.0.0.1"),
    ("http://[64:ff9b:1::a00:1]/", "local-use NAT64"),
    ("http://[2002:7f00:1::1]/", "6to4 carrying loopback"),
    ("http://[2002:c0a8:101::1]/", "6to4 carrying 192.168.1.1"),
    ("http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", "Teredo, client 10.0.0.1"),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo, client 192.0.2.45"),
    ("http://0.0.0.0/", "0.0.0.0/8"),
    ("http://0.1.2.3:8080/", "0.0.0.0/8"),
    ("http://169.254.169.254/latest/meta-data", "cloud metadata, link-local"),
    ("http://127.0.0.1/", "loopback"),
    ("http://127.255.255.254:9000/hook", "loopback /8"),
    ("http://10.1.2.3/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://172.31.255.255/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://100.64.0.1/", "shared address space (CGNAT)"),
    ("http://100.127.255.254/", "shared address space (CGNAT)"),
    ("http://240.0.0.1/", "reserved 240/4"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://224.0.0.1/", "multicast"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://192.0.2.1/", "documentation"),
    ("https://[::1]/", "IPv6 loopback"),
    ("http://[::]/", "IPv6 unspecified"),
    ("http://[::7f00:1]/", "IPv4-compatible loopback"),
    ("http://[fe80::1]/", "IPv6 link-local"),
    ("http://[fe80::1%25eth0]/", "IPv6 link-local with a zone"),
    ("http://[fc00::1]/", "unique local"),
    ("http://[fd12:3456::1]/", "unique local"),
    ("http://[ff02::1]/", "IPv6 multicast"),
    ("http://[2001:db8::1]/", "IPv6 documentation"),
]

ALLOWED_LITERALS = [
    ("http://93.184.215.14/", "public IPv4"),
    ("https://8.8.8.8:8443/hook?x=1", "public IPv4 with port and query"),
    ("http://[2606:4700::1111]/", "public IPv6"),
    ("https://[2a00:1450:4001:82b::200e]/hook", "public IPv6"),
    ("http://[64:ff9b::5db8:d70e]/", "NAT64 carrying 93.184.215.14"),
    ("http://[2002:5db8:d70e::1]/", "6to4 carrying 93.184.215.14"),
    ("http://[::ffff:93.184.215.14]/", "IPv4-mapped 93.184.215.14 (decoded: public)"),
]


@pytest.mark.parametrize(
    ("url", "blocked"),
    [pytest.param(u, True, id=f"blocked: {why}: {u}") for u, why in BLOCKED_LITERALS]
    + [pytest.param(u, False, id=f"allowed: {why}: {u}") for u, why in ALLOWED_LITERALS],
)
def test_policy_table_for_ip_literals(url: str, blocked: bool) -> None:
    ip = ipaddress.ip_address(host_of(url).split("%", 1)[0])
    assert (blocked_reason(ip) is not None) is blocked, blocked_reason(ip)
    if blocked:
        with pytest.raises(RejectedURL) as caught:
            resolve(url, allow_private=False, resolver=no_dns)
        assert caught.value.reason == "blocked_target"
    else:
        target = resolve(url, allow_private=False, resolver=no_dns)
        assert target.url == url
        assert ipaddress.ip_address(target.address) == ip


@pytest.mark.parametrize("url", [u for u, _ in BLOCKED_LITERALS])
def test_private_literal_is_allowed_when_private_targets_are_allowed(url: str) -> None:
    target = resolve(url, allow_private=True, resolver=no_dns)
    assert target.url == url


def test_teredo_fixture_really_carries_a_private_client() -> None:
    ip = ipaddress.IPv6Address("2001:0:4136:e378:8000:63bf:f5ff:fffe")
    assert ip.teredo is not None
    server, client = ip.teredo
    assert server.is_global and client == ipaddress.IPv4Address("10.0.0.1")
    reason = blocked_reason(ip)
    assert reason is not None and "10.0.0.1" in reason


def test_nat64_carrying_public_ipv4_is_allowed() -> None:
    ip = ipaddress.IPv6Address("64:ff9b::5db8:d70e")
    assert ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) == ipaddress.IPv4Address("93.184.215.14")
    assert blocked_reason(ip) is None
    assert resolve("http://[64:ff9b::5db8:d70e]/", False, no_dns).address == str(ip)


def test_rejection_of_private_target_tells_how_to_allow_private_targets() -> None:
    with pytest.raises(RejectedURL) as caught:
        resolve("http://127.0.0.1:8000/hook", allow_private=False, resolver=no_dns)
    message = str(caught.value)
    assert "INBOTS_WEBHOOK_ALLOW_PRIVATE" in message
    assert "127.0.0.1" in message


def test_localhost_resolves_to_loopback_and_is_blocked() -> None:
    try:
        addresses = system_resolver("localhost", 80)
    except OSError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(f"localhost does not resolve here: {exc}")
    assert all(ipaddress.ip_address(a).is_loopback for a in addresses)
    with pytest.raises(RejectedURL, match="INBOTS_WEBHOOK_ALLOW_PRIVATE") as caught:
        resolve("http://localhost/", allow_private=False)
    assert caught.value.reason == "blocked_target"
    assert resolve("http://localhost/", allow_private=True).address in addresses


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",
        "http://0x7f000001/",
        "http://0177.0.0.1/",
        "http://0177.0000.0000.0001/",
        "http://127.1/",
        "http://0x7f.1/",
        "http://2852039166/",  # 169.254.169.254
        "http://012.1.2.3/",  # 10.1.2.3 in octal
    ],
)
def test_numeric_host_forms_resolving_to_private_are_blocked(url: str) -> None:
    host = host_of(url)
    try:
        infos = socket.getaddrinfo(host, 80, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        pytest.skip(f"getaddrinfo refuses {host!r} here: {exc}")
    addresses = {str(info[4][0]) for info in infos}
    assert all(blocked_reason(ipaddress.ip_address(a)) for a in addresses), addresses
    with pytest.raises(RejectedURL, match="INBOTS_WEBHOOK_ALLOW_PRIVATE") as caught:
        resolve(url, allow_private=False)  # the real system resolver
    assert caught.value.reason == "blocked_target"


@pytest.mark.parametrize(
    "addresses",
    [
        ["93.184.215.14", "10.0.0.5"],
        ["10.0.0.5", "93.184.215.14"],
        ["2606:4700::1111", "93.184.215.14", "::1"],
        ["93.184.215.14", "::ffff:169.254.169.254"],
    ],
    ids=["public-then-private", "private-then-public", "v6-public-and-loopback", "mapped"],
)
def test_name_resolving_to_any_private_address_is_blocked(addresses: list[str]) -> None:
    resolver = fake_resolver({"rebind.example": addresses})
    with pytest.raises(RejectedURL, match="INBOTS_WEBHOOK_ALLOW_PRIVATE") as caught:
        resolve("https://rebind.example/hook", allow_private=False, resolver=resolver)
    assert caught.value.reason == "blocked_target"
    assert resolver.asked == [("rebind.example", 443)]  # type: ignore[attr-defined]


def test_name_resolving_only_to_public_addresses_is_allowed() -> None:
    resolver = fake_resolver({"hooks.example": ["93.184.215.14", "2606:4700::1111"]})
    target = resolve("https://hooks.example:8443/in", allow_private=False, resolver=resolver)
    assert (target.host, target.port, target.scheme) == ("hooks.example", 8443, "https")
    assert target.address == "93.184.215.14"
    assert resolver.asked == [("hooks.example", 8443)]  # type: ignore[attr-defined]


def test_name_resolving_to_private_is_allowed_when_private_targets_are_allowed() -> None:
    resolver = fake_resolver({"inside.example": ["10.0.0.5", "93.184.215.14"]})
    target = resolve("http://inside.example/", allow_private=True, resolver=resolver)
    assert target.address == "10.0.0.5"
    assert target.port == 80


def test_name_that_does_not_resolve_is_rejected() -> None:
    def failing(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    for allow in (False, True):
        with pytest.raises(RejectedURL) as caught:
            resolve("http://nowhere.invalid/", allow_private=allow, resolver=failing)
        assert caught.value.reason == "dns"
    with pytest.raises(RejectedURL):
        resolve("http://empty.example/", False, fake_resolver({"empty.example": []}))


# --- shape rules, regardless of allow_private --------------------------------------------------

LONG_PREFIX = "https://93.184.215.14/"

SHAPE_REJECTED = [
    pytest.param("ftp://93.184.215.14/hook", id="ftp"),
    pytest.param("file:///etc/passwd", id="file"),
    pytest.param("javascript:alert(1)", id="javascript"),
    pytest.param("93.184.215.14/hook", id="no-scheme"),
    pytest.param("//93.184.215.14/hook", id="scheme-relative"),
    pytest.param("gopher://93.184.215.14/", id="gopher"),
    pytest.param("ws://93.184.215.14/", id="ws"),
    pytest.param(LONG_PREFIX + "a" * (2049 - len(LONG_PREFIX)), id="2049-chars"),
    pytest.param(LONG_PREFIX + "a" * 5000, id="very-long"),
    pytest.param("http://user:pass@93.184.215.14/", id="user-and-password"),
    pytest.param("http://user@93.184.215.14/", id="user-only"),
    pytest.param("http://:pass@93.184.215.14/", id="password-only"),
    pytest.param("https://user:pass@hooks.example/", id="credentials-on-a-name"),
    pytest.param("http:///hook", id="no-host"),
    pytest.param("http://", id="scheme-only"),
    pytest.param("http://:8080/hook", id="port-without-host"),
    pytest.param("http://93.184.215.14:0/", id="port-0"),
    pytest.param("http://93.184.215.14:65536/", id="port-too-large"),
    pytest.param("http://hooks .example/", id="space-in-host"),
    pytest.param("http://93.184.215.14/a b", id="space-in-path"),
    pytest.param(" http://93.184.215.14/", id="leading-space"),
    pytest.param("http://93.184.215.14/\n", id="newline"),
    pytest.param("http://93.184.215.14/\t", id="tab"),
    pytest.param("", id="empty"),
]


@pytest.mark.parametrize("allow_private", [False, True], ids=["private-blocked", "private-ok"])
@pytest.mark.parametrize("url", SHAPE_REJECTED)
def test_shape_rules_reject_regardless_of_allow_private(url: str, allow_private: bool) -> None:
    resolver = fake_resolver({"hooks.example": ["93.184.215.14"]})
    with pytest.raises(RejectedURL) as caught:
        resolve(url, allow_private=allow_private, resolver=resolver)
    assert caught.value.reason != "blocked_target"
    assert resolver.asked == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("allow_private", [False, True])
def test_url_of_exactly_2048_chars_is_accepted(allow_private: bool) -> None:
    url = LONG_PREFIX + "a" * (2048 - len(LONG_PREFIX))
    assert len(url) == 2048
    assert resolve(url, allow_private=allow_private, resolver=no_dns).url == url


def test_a_url_that_is_not_text_never_reaches_the_policy() -> None:
    """The policy takes text: a URL of another type is refused by the request model, where a
    type is checked once (the empty text is the policy's to refuse)."""
    for value in (None, 42, ["http://93.184.215.14/"], {"url": "http://93.184.215.14/"}):
        with pytest.raises(ValidationError):
            WebhookSet.model_validate({"url": value})
        with pytest.raises(ValidationError):
            AlertWebhookSet.model_validate({"url": value})
        if value is not None:  # no webhook at all
            with pytest.raises(ValidationError):
                AgentCreate.model_validate({"name": "hooked", "webhook_url": value})
    for allow_private in (False, True):
        with pytest.raises(RejectedURL):
            resolve("", allow_private=allow_private, resolver=no_dns)


def test_default_ports_follow_the_scheme() -> None:
    assert resolve("http://93.184.215.14/", False, no_dns).port == 80
    assert resolve("https://93.184.215.14/", False, no_dns).port == 443
    assert resolve("HTTPS://93.184.215.14:444/", False, no_dns).port == 444
