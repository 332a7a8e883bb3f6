"""The SSRF guard of HTTP definitions: a target host is resolved once, every address it
resolves to is checked, and the call connects to the checked address (no second lookup a
rebinding DNS server could answer differently).

Refused unless an operator allows its network (``runtimes.http.allow_networks``): every
address that is not globally routable (loopback, private, link-local, unique-local, shared,
reserved, unspecified, documentation), multicast, and IPv6 forms that embed an IPv4 address
(IPv4-mapped, 6to4, Teredo, NAT64), which are judged by the address they embed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence

from tickwork.errors import AddressRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
NAT64 = ipaddress.ip_network("64:ff9b::/96")
RESERVED_V6 = ipaddress.ip_network("::/8")
"""Reserved by the IETF; Python counts its IPv4-compatible part (``::127.0.0.1``, deprecated,
which some stacks still route to the IPv4 address) as globally routable."""
ALLOW_HINT = (
    "if the definition may reach it, allow its network in runtimes.http.allow_networks "
    "(TICKWORK_RUNTIMES__HTTP__ALLOW_NETWORKS)"
)
"""Said with every address refused: the setting that allows a network."""


def networks(allowed: Sequence[str]) -> list[IPNetwork]:
    """The settings' allow-list as networks (checked when the settings load)."""
    return [ipaddress.ip_network(n, strict=False) for n in allowed]


def _embedded(ip: IPAddress) -> IPAddress:
    """The IPv4 address an IPv6 form carries, if any (else the address itself)."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if ip.teredo is not None:
            return ip.teredo[1]
        if ip in NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def refusal(ip: IPAddress, allow: Sequence[IPNetwork]) -> str | None:
    """Why a call may not connect to ``ip``, or None when it may."""
    if any(ip in network for network in allow):
        return None
    inner = _embedded(ip)
    if inner is not ip and any(inner in network for network in allow):
        return None
    for candidate in dict.fromkeys((inner, ip)):  # the embedded address names the reason
        if candidate.is_loopback:
            return "a loopback address"
        if candidate.is_multicast:
            return "a multicast address"
        if candidate.is_link_local:
            return "a link-local address (cloud metadata lives there)"
        if candidate.is_unspecified:
            return "the unspecified address"
        if candidate.is_private:
            return "a private address"
        if candidate in RESERVED_V6:
            return "a reserved address (::/8, IPv4-compatible forms included)"
        if not candidate.is_global:
            return "not a globally routable address"
    return None


async def checked_address(url: str, host: str, port: int, allow: Sequence[IPNetwork]) -> str:
    """The address to connect to for ``host``: resolved once (IP literals in any spelling
    the resolver takes, e.g. ``2130706433`` or ``0177.0.0.1``, resolve to what they mean);
    refused, naming the address, when any address it resolves to is refused."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (OSError, UnicodeError) as exc:
        raise AddressRefused(url, host, f"it does not resolve ({exc})") from None
    addresses = list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))
    if not addresses:
        raise AddressRefused(url, host, "it resolves to no address")
    for text in addresses:
        ip = ipaddress.ip_address(text)
        reason = refusal(ip, allow)
        if reason is not None:  # the refusal names the setting that allows it
            raise AddressRefused(url, text, f"{reason}; {ALLOW_HINT}")
    return addresses[0]
