"""What `svc doctor` finds on the engine and in its log: the leftovers of daemons that are gone, and
the Docker 20.10 failure mode that keeps the engine from starting after a stop interrupted a
network's creation.

Doctor talks to the engine directly, not through the daemon: leftovers matter most when the daemon
is down (killed, crashed, its home deleted), and a running daemon removes its own unowned objects
every SERVICE_REAP_INTERVAL seconds (daemon/sandbox/lifecycle.py `sweep`). So:

- objects of the running daemon (this home's daemon id while the daemon answers) are never
  leftovers here: its sweep decides with what only it knows (booting and pooled sandboxes);
- objects of this home's daemon while it is not running are all leftovers (nothing of it is live);
- objects of another daemon id are leftovers when none of its containers is running; a daemon id
  with running containers may be another home's live daemon and is only reported, never removed,
  and so is one with an object younger than GRACE_S (a live daemon booting a sandbox has a
  network and created containers, none running yet);
- an agent layer's build container (`svc.role=agent-layer-build`) that is no longer running.

`svc doctor --fix` removes the leftovers (containers first, then networks, then volumes).
"""
from __future__ import annotations

import re
import shutil
import sqlite3
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemon.sandbox.lifecycle import created_at

NETWORK_STORE = "/var/lib/docker/network/files/local-kv.db"
ENGINE_LOGS = ("/var/log/dockerd.log", "/var/log/docker.log")
GRACE_S = 120.0


@dataclass
class Leftovers:
    """Engine objects to remove, by kind -> ids (volume names), and what was spared and why."""

    containers: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    daemons: list[str] = field(default_factory=list)  # the daemon ids they belong to
    spared: list[str] = field(default_factory=list)  # "<daemon id>: n running containers" (maybe live)

    def count(self) -> int:
        return len(self.containers) + len(self.networks) + len(self.volumes)

    def summary(self) -> str:
        parts = [f"{len(v)} {k}" for k, v in (("containers", self.containers), ("networks", self.networks),
                                              ("volumes", self.volumes)) if v]
        return ", ".join(parts) + (f" of {', '.join(self.daemons)}" if self.daemons else "")


def home_daemon_id(home: Path) -> str | None:
    """This home's daemon id, read from its store (read-only); None when there is no store yet."""
    path = home / "svc.db"
    if not path.is_file():
        return None
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            row = db.execute("SELECT value FROM daemon_meta WHERE key = 'daemon_id'").fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def classify(containers: list[dict[str, Any]], networks: list[dict[str, Any]], volumes: list[dict[str, Any]],
             running_daemon: str | None, home_daemon: str | None, now: float | None = None,
             grace_s: float = GRACE_S) -> Leftovers:
    """The leftovers among the engine's objects labelled `svc.daemon` (listings as the engine API
    gives them) and its agent-layer build containers; see the module's docstring for the rules."""
    now = time.time() if now is None else now
    found = Leftovers()
    by_daemon: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: {"c": [], "n": [], "v": []})
    for key, listing in (("c", containers), ("n", networks), ("v", volumes)):
        for obj in listing:
            labels = obj.get("Labels") or {}
            if key == "c" and labels.get("svc.role") == "agent-layer-build" and "svc.daemon" not in labels:
                if obj.get("State") != "running":
                    found.containers.append(obj["Id"])
                continue
            if "svc.daemon" in labels:
                by_daemon[labels["svc.daemon"]][key].append(obj)
    for daemon, objects in sorted(by_daemon.items()):
        if daemon == running_daemon:
            continue
        running = [c for c in objects["c"] if c.get("State") == "running"]
        if running and daemon != home_daemon:
            found.spared.append(f"{daemon}: {len(running)} running container(s), maybe another home's live daemon")
            continue
        stamps = [created_at(o) for kind in objects.values() for o in kind]
        if daemon != home_daemon and any(t is None or now - t < grace_s for t in stamps):
            found.spared.append(f"{daemon}: objects created in the last {grace_s:g}s, maybe a sandbox booting")
            continue
        found.daemons.append(daemon)
        found.containers += [c["Id"] for c in objects["c"]]
        found.networks += [n["Id"] for n in objects["n"]]
        found.volumes += [v["Name"] for v in objects["v"]]
    return found


def find(api: Any, running_daemon: str | None, home_daemon: str | None) -> Leftovers:
    """`classify` over what the engine (a docker.APIClient) lists now."""
    label = {"label": "svc.daemon"}
    containers = api.containers(all=True, filters=label)
    containers += api.containers(all=True, filters={"label": "svc.role=agent-layer-build"})
    networks = api.networks(filters=label)
    volumes = api.volumes(filters=label).get("Volumes") or []
    return classify(containers, networks, volumes, running_daemon, home_daemon)


def remove(api: Any, leftovers: Leftovers) -> list[str]:
    """Remove them; returns what could not be removed (kind id: why)."""
    import docker.errors

    failed: list[str] = []
    steps = ((leftovers.containers, lambda i: api.remove_container(i, force=True, v=True), "container"),
             (leftovers.networks, api.remove_network, "network"),
             (leftovers.volumes, lambda i: api.remove_volume(i, force=True), "volume"))
    for ids, call, kind in steps:
        for ident in ids:
            try:
                call(ident)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                failed.append(f"{kind} {ident[:12]}: {exc.explanation or exc}")
    return failed


# --- the engine's network-store panic ---------------------------------------------------------

_START = re.compile(r"Starting up|API listen on|Daemon has completed initialization")
_PANIC = re.compile(r"panic: .*")
_NETWORK_FRAME = re.compile(r"libnetwork|drivers/bridge")


def network_store_panic(log: str) -> str | None:
    """The panic line when the engine's last start in `log` died in libnetwork (Docker 20.10 on
    Debian: a stop that interrupted a network's creation leaves a record in the network store it
    panics on while restoring it, every start); None otherwise. Only the text after the last
    start is read: a panic from an earlier start that a later one got past does not count."""
    lines = log.splitlines()
    starts = [i for i, line in enumerate(lines) if "Starting up" in line]
    last = lines[starts[-1]:] if starts else lines
    for index, line in enumerate(last):
        match = _PANIC.search(line)
        if match is None or "http: panic serving" in line:
            continue
        after = last[index + 1:index + 60]
        if any(_START.search(rest) for rest in after):  # it came back up
            continue
        if any(_NETWORK_FRAME.search(rest) for rest in after):
            return match.group(0).strip()
    return None


def engine_log() -> tuple[str, str] | None:
    """(where, text): the engine's recent log from journald's docker unit or a dockerd log file;
    None when neither is readable."""
    if shutil.which("journalctl"):
        try:
            out = subprocess.run(["journalctl", "-u", "docker", "-n", "3000", "--no-pager", "-o", "cat"],
                                 capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip() and "No entries" not in out.stdout[:200]:
                return "journalctl -u docker", out.stdout
        except (OSError, subprocess.SubprocessError):
            pass
    for path in ENGINE_LOGS:
        try:
            with open(path, "rb") as handle:
                handle.seek(0, 2)
                size = handle.tell()
                handle.seek(max(0, size - 2 * 1024 * 1024))
                return path, handle.read().decode("utf-8", "replace")
        except OSError:
            continue
    return None


NETWORK_STORE_FIX = (f"the engine panics restoring its network store: stop dockerd, move {NETWORK_STORE} aside "
                     f"(mv {NETWORK_STORE} {NETWORK_STORE}.broken) and start dockerd again; it rebuilds the store "
                     "(networks that no container uses are gone; svc recreates its own)")
