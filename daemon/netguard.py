"""Outbound URLs the daemon calls on a tenant's behalf (webhooks; alerts later) must not reach
link-local or cloud metadata addresses: 169.254.0.0/16 (169.254.169.254 is the metadata service of
most clouds), fe80::/10, fd00:ec2::254 (AWS over IPv6), 100.100.100.200 (Alibaba) and names such as
metadata.google.internal. Loopback stays allowed: local tools listen there.

* :func:`check_outbound_url` is the one check: call it when a URL is registered (400 naming the
  field) and again right before each send (DNS can change in between): it raises
  :class:`UnsafeURL`.
* :class:`GuardedResolver` is an aiohttp resolver that refuses the same addresses at connect time,
  so a name that changes its answer between the check and the connection is refused too. Use it in
  every outbound :class:`aiohttp.ClientSession` (``guarded_connector()``) and send with
  ``allow_redirects=False``.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver

FORBIDDEN_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("fd00:ec2::254/128"),
    ipaddress.ip_network("100.100.100.200/32"),
)
METADATA_HOSTS = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "metadata.azure.internal", "instance-data",
    "instance-data.ec2.internal",
})
RESOLVE_TIMEOUT_S = 5.0


class UnsafeURL(ValueError):
    """The URL names or resolves to an address the daemon never calls."""


def forbidden_address(address: str) -> str | None:
    """Why `address` (an IP literal) is refused, or None when it may be called."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    candidates = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            candidates.append(ip.sixtofour)
        if ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64: the IPv4 address is the last 32 bits
            candidates.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    for candidate in candidates:
        if candidate.is_loopback:
            continue
        for network in FORBIDDEN_NETWORKS:
            if candidate.version == network.version and candidate in network:
                kind = "a cloud metadata address" if network.prefixlen >= 32 or str(candidate) == "169.254.169.254" else "link-local"
                return f"{address} is {kind} ({network})"
    return None


def _host_of(url: str) -> tuple[str, int | None]:
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"not a valid URL: {exc}")
    if parts.scheme not in ("http", "https"):
        raise UnsafeURL("only http:// and https:// URLs are allowed")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise UnsafeURL("the URL has no host")
    return host, port


async def check_outbound_url(url: str, *, resolve: bool = True) -> None:
    """Raise UnsafeURL when `url` names, or (with `resolve`) resolves to, a link-local or
    metadata address. A name that does not resolve now passes: the send checks again."""
    host, port = _host_of(url)
    if host in METADATA_HOSTS:
        raise UnsafeURL(f"{host} is a cloud metadata service")
    why = forbidden_address(host)
    if why:
        raise UnsafeURL(why)
    if not resolve:
        return
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return  # an IP literal: checked above
    except ValueError:
        pass
    try:
        addresses = await asyncio.wait_for(resolve_host(host, port or 80), RESOLVE_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError, UnicodeError):
        return
    for address in addresses:
        why = forbidden_address(address)
        if why:
            raise UnsafeURL(f"{host} resolves to {why}")


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to now (tests replace this to play DNS)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


class GuardedResolver(AbstractResolver):
    """aiohttp resolver refusing (OSError) any name with a forbidden address among its answers."""

    def __init__(self, inner: AbstractResolver | None = None):
        self.inner = inner or aiohttp.ThreadedResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        if host.rstrip(".").lower() in METADATA_HOSTS:
            raise OSError(f"refused: {host} is a cloud metadata service")
        answers = await self.inner.resolve(host, port, family)
        for answer in answers:
            why = forbidden_address(answer["host"])
            if why:
                raise OSError(f"refused: {host} resolves to {why}")
        return answers

    async def close(self) -> None:
        await self.inner.close()


def guarded_connector(**kwargs: Any) -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(resolver=GuardedResolver(), **kwargs)
