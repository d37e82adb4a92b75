"""Outbound URLs the daemon calls on a tenant's behalf (webhooks, alert channels) must not reach
the daemon's own host or its networks:

* never, whatever the operator says: link-local addresses (169.254.0.0/16, fe80::/10) and the cloud
  metadata addresses and names of daemon/sandbox/programs/cloud_metadata.py (169.254.169.254,
  fd00:ec2::254, 100.100.100.200, 168.63.129.16, metadata.google.internal, ...), the one list the
  sandbox's egress proxy refuses too;
* unless the operator allows them (``SERVICE_OUTBOUND_ALLOW_PRIVATE=1``, Settings.outbound_allow_private,
  applied by :func:`configure` when the app is created): loopback (127/8, ::1), unspecified
  (0.0.0.0, ::), private and other non-public ranges (10/8, 172.16/12, 192.168/16, 100.64/10,
  fc00::/7, ...) and every address of the host's own interfaces. Otherwise a tenant could reach
  local tools and scan the host's ports through a webhook.

* :func:`check_outbound_url` is the one check: call it when a URL is registered (400 naming the
  field) and again right before each send (DNS can change in between): it raises
  :class:`UnsafeURL`.
* :class:`GuardedResolver` is an aiohttp resolver that refuses the same addresses at connect time,
  so a name that changes its answer between the check and the connection is refused too. Use it in
  every outbound :class:`aiohttp.ClientSession` (``guarded_connector()``) and send with
  ``allow_redirects=False``.
* A send that gets no HTTP answer (refused, reset, unreachable, timed out, TLS failure, refused by
  the resolver) is recorded as :data:`NO_ANSWER`, the same text whatever the cause, so a delivery
  log or a test send tells nothing about what listens where (:func:`no_answer`).
"""
from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver

from daemon.sandbox.programs.cloud_metadata import METADATA_HOSTS, metadata_address

# Link-local ranges; the cloud metadata addresses and names are cloud_metadata's (shared with the egress proxy).
FORBIDDEN_NETWORKS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
)
RESOLVE_TIMEOUT_S = 5.0
# Not public although Python's is_private says no (shared address space, RFC 6598).
NON_PUBLIC_NETWORKS = (ipaddress.ip_network("100.64.0.0/10"),)
HOST_ADDRESSES_TTL_S = 10.0
NO_ANSWER = "no answer from the destination (the connection failed or timed out)"
ALLOW_HINT = ("the daemon calls only public addresses: loopback, private and this host's own addresses need the "
              "operator setting SERVICE_OUTBOUND_ALLOW_PRIVATE=1; link-local and cloud metadata addresses are never called")

log = logging.getLogger("svcd.netguard")
_policy = {"allow_private": False}
_host_cache: dict[str, Any] = {"at": float("-inf"), "addresses": frozenset()}


def configure(allow_private: bool) -> None:
    """The operator's choice (Settings.outbound_allow_private), process-wide: create_app calls it."""
    _policy["allow_private"] = bool(allow_private)


def private_allowed() -> bool:
    return _policy["allow_private"]


def no_answer(exc: BaseException, url: str) -> str:
    """The one text recorded for a send without an HTTP answer; the cause goes to the daemon's log only."""
    log.info("outbound send to %s got no answer: %s: %s", url, type(exc).__name__, exc)
    return NO_ANSWER


class UnsafeURL(ValueError):
    """The URL names or resolves to an address the daemon never calls."""


def forbidden_address(address: str) -> str | None:
    """Why `address` (an IP literal) is refused, or None when it may be called."""
    why = metadata_address(address)
    if why:
        return why
    for candidate in _candidates(address):
        if candidate.is_loopback:
            continue
        for network in FORBIDDEN_NETWORKS:
            if candidate.version == network.version and candidate in network:
                return f"{address} is link-local ({network})"
    return None


def host_addresses() -> frozenset:
    """Every address of this host's interfaces (cached a few seconds)."""
    now = time.monotonic()
    if now - _host_cache["at"] < HOST_ADDRESSES_TTL_S:
        return _host_cache["addresses"]
    found = set()
    try:
        import psutil

        for entries in psutil.net_if_addrs().values():
            for entry in entries:
                if entry.family in (socket.AF_INET, socket.AF_INET6):
                    try:
                        found.add(ipaddress.ip_address(entry.address.split("%", 1)[0]))
                    except ValueError:
                        pass
    except Exception:  # no interface list: the ranges below still cover loopback and private networks
        log.debug("cannot list the host's interface addresses", exc_info=True)
    _host_cache.update(at=now, addresses=frozenset(found))
    return _host_cache["addresses"]


def _candidates(address: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The address and the IPv4 addresses an IPv6 one embeds (mapped, 6to4, NAT64); empty when
    `address` is not an IP literal."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return []
    candidates: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            candidates.append(ip.sixtofour)
        if ip in ipaddress.ip_network("64:ff9b::/96"):  # NAT64: the IPv4 address is the last 32 bits
            candidates.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return candidates


def private_address(address: str) -> str | None:
    """Why `address` (an IP literal) is loopback, private or this host's, or None when it is public."""
    host = host_addresses()
    for candidate in _candidates(address):
        if candidate.is_loopback:
            return f"{address} is loopback"
        if candidate.is_unspecified:
            return f"{address} is unspecified (this host)"
        if candidate in host:
            return f"{address} is an address of this host"
        if (candidate.is_private or candidate.is_reserved or candidate.is_multicast or candidate.is_link_local
                or getattr(candidate, "is_site_local", False)
                or any(candidate.version == n.version and candidate in n for n in NON_PUBLIC_NETWORKS)):
            return f"{address} is a private or non-public address"
    return None


def refused_address(address: str, allow_private: bool | None = None) -> str | None:
    """Why the daemon refuses to call `address`: always link-local and metadata addresses, and
    loopback, private and host addresses unless the operator allows them."""
    why = forbidden_address(address)
    if why:
        return why
    if allow_private is None:
        allow_private = private_allowed()
    return None if allow_private else private_address(address)


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


async def check_outbound_url(url: str, *, resolve: bool = True, allow_private: bool | None = None) -> None:
    """Raise UnsafeURL when `url` names, or (with `resolve`) resolves to, an address the daemon
    refuses (:func:`refused_address`; `allow_private` None: the operator's setting). A name that
    does not resolve now passes: the send checks again."""
    host, port = _host_of(url)
    if host in METADATA_HOSTS:
        raise UnsafeURL(f"{host} is a cloud metadata service")
    if allow_private is None:
        allow_private = private_allowed()
    if not allow_private and (host == "localhost" or host.endswith(".localhost")):
        raise UnsafeURL(f"{host} is loopback")
    why = refused_address(host, allow_private)
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
        why = refused_address(address, allow_private)
        if why:
            raise UnsafeURL(f"{host} resolves to {why}")


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to now (tests replace this to play DNS)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [info[4][0] for info in infos]


class GuardedResolver(AbstractResolver):
    """aiohttp resolver refusing (OSError) any name with a refused address among its answers
    (`allow_private` None: the operator's setting at each resolution)."""

    def __init__(self, inner: AbstractResolver | None = None, allow_private: bool | None = None):
        self.inner = inner or aiohttp.ThreadedResolver()
        self.allow_private = allow_private

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET) -> list[dict[str, Any]]:
        if host.rstrip(".").lower() in METADATA_HOSTS:
            raise OSError(f"refused: {host} is a cloud metadata service")
        answers = await self.inner.resolve(host, port, family)
        for answer in answers:
            why = refused_address(answer["host"], self.allow_private)
            if why:
                raise OSError(f"refused: {host} resolves to {why}")
        return answers

    async def close(self) -> None:
        await self.inner.close()


def guarded_connector(**kwargs: Any) -> aiohttp.TCPConnector:
    return aiohttp.TCPConnector(resolver=GuardedResolver(), **kwargs)
