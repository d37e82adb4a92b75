"""Host firewall of sandbox networks: nothing on a sandbox's internal network may open a connection
to the host (DESIGN.md "Sandboxes").

Docker's `internal` networks drop *forwarded* packets, but a packet from a container to any address
of the host itself (the network's gateway, docker0, eth0...) goes through the host's INPUT chain,
which accepts it by default. So, for each sandbox network, one rule on its bridge interface in a
chain of our own:

    -I INPUT 1 -j SVC-SANDBOX
    -A SVC-SANDBOX -i br-<id> -m conntrack ! --ctstate ESTABLISHED,RELATED \
        -m comment --comment "svc-sandbox=<sandbox id> daemon=<daemon id>" -j REJECT

Replies to connections the host opened (docker-proxy of published ingress ports) stay allowed. The
same with ip6tables when it exists (plus neighbour discovery, which conntrack does not track). The
comment names the sandbox, so teardown removes exactly its rules; at start-up the daemon removes
its own leftovers and any rule whose bridge no longer exists. Commands run as subprocesses off the
event loop, one at a time, with a timeout, and with `-w` (the xtables lock) against other
processes. `SERVICE_SANDBOX_FIREWALL=off` turns all of this off (the manager then logs a warning).
"""
from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from daemon.config import Settings

log = logging.getLogger("svcd.sandbox.firewall")

CHAIN = "SVC-SANDBOX"
TAG = "svc-sandbox="
TIMEOUT_S = 15.0
NDP = ("neighbour-solicitation", "neighbour-advertisement")


class FirewallError(Exception):
    """A firewall rule could not be installed (the sandbox must not boot)."""


def comment(sandbox_id: str, daemon_id: str) -> str:
    return f"{TAG}{sandbox_id} daemon={daemon_id}"


def parse_rule(line: str) -> dict[str, str] | None:
    """`-A SVC-SANDBOX ...` (from `iptables -S`) -> {sandbox, daemon, iface, spec}; None for
    anything that is not one of our per-sandbox rules."""
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if words[:2] != ["-A", CHAIN] or "--comment" not in words or "-i" not in words:
        return None
    text = words[words.index("--comment") + 1]
    if not text.startswith(TAG):
        return None
    fields = dict(part.split("=", 1) for part in text.split() if "=" in part)
    return {"sandbox": fields.get("svc-sandbox", ""), "daemon": fields.get("daemon", ""),
            "iface": words[words.index("-i") + 1], "spec": line}


def interface_exists(name: str) -> bool | None:
    """None when this process cannot tell (no /sys/class/net)."""
    if not os.path.isdir("/sys/class/net"):
        return None
    return os.path.exists(f"/sys/class/net/{name}")


def _resolve(binary: str) -> str:
    """A bare name: from PATH, else /usr/sbin or /sbin (often missing from a user's PATH)."""
    if "/" in binary or shutil.which(binary):
        return binary
    for directory in ("/usr/sbin", "/sbin"):
        if os.access(os.path.join(directory, binary), os.X_OK):
            return os.path.join(directory, binary)
    return binary


class SandboxFirewall:
    def __init__(self, enabled: bool = True, iptables: str = "iptables", ip6tables: str | None = None,
                 timeout_s: float = TIMEOUT_S):
        self.enabled = enabled
        self.iptables = iptables = _resolve(iptables)
        if ip6tables is None:  # next to iptables, same name pattern
            head, base = os.path.split(iptables)
            ip6tables = os.path.join(head, base.replace("iptables", "ip6tables", 1)) if "iptables" in base else ""
        self.ip6tables = _resolve(ip6tables) if ip6tables else ""
        self.timeout_s = timeout_s
        self._lock: asyncio.Lock | None = None
        self._top_checked: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Settings) -> SandboxFirewall:
        return cls(enabled=bool(getattr(settings, "sandbox_firewall", True)),
                   iptables=getattr(settings, "iptables", None) or "iptables",
                   ip6tables=getattr(settings, "ip6tables", None))

    # --- plumbing ----------------------------------------------------------------------------

    def _binaries(self) -> list[str]:
        out = [self.iptables]
        if self.ip6tables and os.path.exists("/proc/net/if_inet6") and shutil.which(self.ip6tables):
            out.append(self.ip6tables)
        return out

    async def _run(self, binary: str, *args: str, check: bool = True) -> tuple[int, str]:
        argv = [binary, "-w", "5", *args]
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise FirewallError(f"cannot run {binary}: {exc.strerror or exc}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except BaseException as exc:  # timeout or cancelled: never leave the process behind
            if proc.returncode is None:
                proc.kill()
                await asyncio.shield(proc.wait())
            if isinstance(exc, asyncio.TimeoutError):
                raise FirewallError(f"`{shlex.join(argv)}` did not finish within {self.timeout_s:g}s") from None
            raise
        text = (out + err).decode("utf-8", "replace").strip()
        if check and proc.returncode != 0:
            raise FirewallError(f"`{shlex.join(argv)}` failed (exit {proc.returncode}): {text[:300]}")
        return proc.returncode or 0, text

    def _locked(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def _ensure_chain(self, binary: str) -> None:
        """The chain exists and INPUT jumps to it first."""
        if binary in self._top_checked:
            if (await self._run(binary, "-C", "INPUT", "-j", CHAIN, check=False))[0] == 0:
                return
        if (await self._run(binary, "-S", CHAIN, check=False))[0] != 0:
            code, text = await self._run(binary, "-N", CHAIN, check=False)
            if code != 0 and (await self._run(binary, "-S", CHAIN, check=False))[0] != 0:  # not a lost race
                raise FirewallError(f"`{binary} -N {CHAIN}` failed: {text[:300]}")
        jump = f"-A INPUT -j {CHAIN}"
        _, rules = await self._run(binary, "-S", "INPUT")
        appended = [line for line in rules.splitlines() if line.startswith("-A ")]
        if not appended or appended[0] != jump:
            # A jump further down (a rule was put above it) stays: removing it would open a gap,
            # and a second pass through the chain is harmless.
            await self._run(binary, "-I", "INPUT", "1", "-j", CHAIN)
        self._top_checked.add(binary)

    async def _rules(self, binary: str) -> list[dict[str, str]]:
        code, text = await self._run(binary, "-S", CHAIN, check=False)
        if code != 0:
            return []  # no chain: no rules
        return [rule for rule in map(parse_rule, text.splitlines()) if rule is not None]

    async def _delete(self, binary: str, rule: dict[str, str]) -> None:
        words = shlex.split(rule["spec"])
        await self._run(binary, "-D", *words[1:], check=False)

    # --- per sandbox -------------------------------------------------------------------------

    async def protect(self, bridge: str, sandbox_id: str, daemon_id: str) -> None:
        """Reject every new connection from `bridge` to the host. FirewallError when any rule
        cannot be installed."""
        if interface_exists(bridge) is False:
            raise FirewallError(f"bridge interface {bridge} not found on this host (is the Docker engine on another "
                                "machine or in another network namespace, e.g. rootless?)")
        note = comment(sandbox_id, daemon_id)
        async with self._locked():
            for binary in self._binaries():
                await self._ensure_chain(binary)
                base = ["-A", CHAIN, "-i", bridge]
                if "ip6tables" in os.path.basename(binary):
                    for kind in NDP:
                        await self._run(binary, *base, "-p", "ipv6-icmp", "-m", "icmp6", "--icmpv6-type", kind,
                                        "-m", "comment", "--comment", note, "-j", "RETURN")
                await self._run(binary, *base, "-m", "conntrack", "!", "--ctstate", "ESTABLISHED,RELATED",
                                "-m", "comment", "--comment", note, "-j", "REJECT")

    async def release(self, sandbox_id: str) -> int:
        """Remove the sandbox's rules; how many were removed."""
        removed = 0
        async with self._locked():
            for binary in self._binaries():
                for rule in await self._rules(binary):
                    if rule["sandbox"] == sandbox_id:
                        await self._delete(binary, rule)
                        removed += 1
        return removed

    async def reap(self, daemon_id: str, live: set[str] | Callable[[], set[str]]) -> int:
        """Remove this daemon's rules of sandboxes (or pooled networks) that are not `live`, and every
        rule whose bridge interface no longer exists (its network is gone, whoever made it). A
        callable `live` is asked after the rules are listed, under the lock `protect` takes: a rule
        installed by then belongs to something registered before it, so a sandbox booting during a
        sweep never loses its rule."""
        removed = 0
        async with self._locked():
            for binary in self._binaries():
                rules = await self._rules(binary)
                owned = live() if callable(live) else live
                for rule in rules:
                    mine_and_dead = rule["daemon"] == daemon_id and rule["sandbox"] not in owned
                    if mine_and_dead or interface_exists(rule["iface"]) is False:
                        await self._delete(binary, rule)
                        removed += 1
        return removed

    async def rules_of(self, sandbox_id: str) -> list[str]:
        """The sandbox's rules as `iptables -S` prints them (both families)."""
        out: list[str] = []
        for binary in self._binaries():
            out += [r["spec"] for r in await self._rules(binary) if r["sandbox"] == sandbox_id]
        return out
