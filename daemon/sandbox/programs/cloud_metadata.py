"""The cloud metadata services: the one list of addresses and names that the daemon's outbound guard
(daemon/netguard.py: webhooks, alert channels) and the sandbox's egress proxy and model gateway
(programs/egress_proxy.py, model_gateway.py) refuse, whatever a spec's `network.egress.allow` or a
tenant's URL says. No operator setting opens them (`SERVICE_EGRESS_ALLOW_PRIVATE` and
`SERVICE_OUTBOUND_ALLOW_PRIVATE` open private and host addresses, never these): what answers there
hands out the machine's cloud credentials.

Standard library only: it runs inside the proxy's container too, mounted beside it at /svc-programs
(the daemon imports it as daemon.sandbox.programs.cloud_metadata). tests/security/test_egress_metadata.py
checks that both sides read this list.
"""
from __future__ import annotations

import ipaddress

# address -> whose metadata service answers there
METADATA_ADDRESSES: dict[str, str] = {
    "169.254.169.254": "the metadata service of AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack and most clouds",
    "fd00:ec2::254": "AWS's instance metadata service over IPv6",
    "fd20:ce::254": "GCP's metadata server over IPv6",
    "169.254.170.2": "AWS ECS's task metadata and credentials endpoint",
    "169.254.170.23": "AWS EKS Pod Identity's credentials agent",
    "fd00:ec2::23": "AWS EKS Pod Identity's credentials agent over IPv6",
    "100.100.100.200": "Alibaba Cloud's metadata service",
    "168.63.129.16": "Azure's wireserver (host agent and DNS)",
    "169.254.0.23": "Tencent Cloud's metadata service",
    "169.254.42.42": "Scaleway's metadata service",
    "192.0.0.192": "Oracle Cloud Classic's metadata service",
}
# Names of metadata services (compared lowercased, without a trailing dot).
METADATA_HOSTS: frozenset[str] = frozenset({
    "metadata.google.internal", "metadata.goog", "metadata", "metadata.azure.internal", "instance-data",
    "instance-data.ec2.internal", "metadata.tencentyun.com", "metadata.platformequinix.com", "metadata.packet.net",
})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_ADDRESSES = {ipaddress.ip_address(a): a for a in METADATA_ADDRESSES}


def _candidates(address: str) -> list:
    """The address and the IPv4 addresses an IPv6 one embeds (mapped, 6to4, NAT64); empty when
    `address` is not an IP literal."""
    try:
        ip = ipaddress.ip_address(str(address).strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return []
    candidates = [ip]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        if ip.sixtofour is not None:
            candidates.append(ip.sixtofour)
        if ip in _NAT64:  # the IPv4 address is the last 32 bits
            candidates.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return candidates


def metadata_address(address: str) -> str | None:
    """Why `address` (an IP literal, also one embedding an IPv4 address) is a metadata address, or
    None when it is not one (or not an IP literal)."""
    for candidate in _candidates(address):
        listed = _ADDRESSES.get(candidate)
        if listed is not None:
            return f"{address} is a cloud metadata address ({listed}: {METADATA_ADDRESSES[listed]})"
    return None


def metadata_host(name: str) -> str | None:
    """Why `name` (a host name or an IP literal) is a metadata service, or None."""
    host = str(name).strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host in METADATA_HOSTS:
        return f"{host} is a cloud metadata service"
    return metadata_address(host)
