"""The local swarm's ssh keys, made with ssh-keygen and cached: one client key for svcd and the
tests, one host key every node serves, and the ssh_config that uses them (key only, host key
checked against known_hosts, never a prompt).

    <dir>/client, client.pub         svcd's key (IdentityFile)
    <dir>/known_hosts                every node address -> the nodes' host key
    <dir>/ssh_config                 SERVICE_SWARM_SSH_CONFIG
    <dir>/node/{authorized_keys, ssh_host_ed25519_key}   copied into each node as /etc/svc-ssh
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path


def _keygen(path: Path, comment: str) -> None:
    p = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"[swarm] ssh-keygen failed: {p.stderr.strip()[-400:]}")


def ensure(directory: Path, addresses: list[str]) -> str:
    """Keys made once (kept while they exist); known_hosts and ssh_config written for `addresses`.
    Returns a fingerprint of what the nodes hold (a node started with other keys is replaced)."""
    node = directory / "node"
    if not (directory / "client").exists() or not (node / "ssh_host_ed25519_key").exists():
        shutil.rmtree(directory, ignore_errors=True)
        node.mkdir(parents=True)
        directory.chmod(0o700)
        _keygen(directory / "client", "svc-swarm-client")
        _keygen(node / "ssh_host_ed25519_key", "svc-swarm-node")
        shutil.copyfile(directory / "client.pub", node / "authorized_keys")
    host_key = (node / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    (directory / "known_hosts").write_text("".join(f"{address} {' '.join(host_key)}\n" for address in addresses))
    (directory / "ssh_config").write_text(
        "Host *\n"
        "  User root\n"
        f"  IdentityFile {directory / 'client'}\n"
        "  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {directory / 'known_hosts'}\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n"
        "  PasswordAuthentication no\n"
        "  BatchMode yes\n")
    digest = hashlib.sha256()
    for name in ("authorized_keys", "ssh_host_ed25519_key.pub"):
        digest.update((node / name).read_bytes())
    return digest.hexdigest()[:12]
