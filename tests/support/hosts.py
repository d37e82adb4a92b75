"""This machine's own addresses as containers see them."""
from __future__ import annotations

import ipaddress


def docker0_address(docker_client) -> str:
    """docker0's address (the default bridge's gateway): a host address a container reaches only
    where the daemon's firewall lets it (SERVICE_EGRESS_ALLOW_PRIVATE in the gateway tests)."""
    config = docker_client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
