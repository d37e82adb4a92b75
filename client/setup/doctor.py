"""`svc doctor` (and the setup phase): each check prints ok or a hint; any failure means exit 1."""
from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from client.api import ApiError, Client, DaemonUnreachable
from client.routes import R


@dataclass
class Check:
    name: str
    ok: bool
    detail: str  # what was found, or the hint to fix it
    warn: bool = False  # ok, but worth acting on (leftovers on the engine): does not fail doctor

    def line(self) -> str:
        return f"{'FAIL' if not self.ok else 'warn' if self.warn else 'ok  '}  {self.name}: {self.detail}"

    def as_dict(self) -> dict:
        return {"check": self.name, "ok": self.ok, "detail": self.detail, **({"warn": True} if self.warn else {})}


def check_env_files(project: Path) -> Check:
    bad: list[str] = []
    found: list[str] = []
    for name in (".env", ".env.local"):
        path = project / name
        if not path.is_file():
            continue
        found.append(name)
        for number, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
            line = raw.strip()
            if line and not line.startswith("#") and "=" not in line:
                bad.append(f"{name}:{number}")
    if bad:
        return Check("env files", False, f"lines without NAME=VALUE at {', '.join(bad[:5])}; fix or comment them out")
    return Check("env files", True, ", ".join(found) + " parse" if found else "none (optional)")


def check_key(client: Client) -> Check:
    if client.config.api_key:
        return Check("API key", True, f"from {client.config.api_key_source}")
    return Check("API key", False, "none found: run `svc login`, set SERVICE_API_KEY, or start the local daemon once")


async def check_daemon(client: Client, cli_version: str) -> list[Check]:
    base = client.config.base_url
    try:
        health = await client.call(R.HEALTH, timeout=5)
    except (DaemonUnreachable, ApiError) as exc:
        return [Check("daemon reachable", False, f"{base}: {exc}; start it with `svc daemon start` or fix SERVICE_BASE_URL")]
    checks = [Check("daemon reachable", True, base)]
    try:
        await client.call(R.LIST_EXPERIMENTS, query={"limit": 1}, timeout=5)
        checks.append(Check("key accepted", True, "the daemon accepts the key"))
    except ApiError as exc:
        checks.append(Check("key accepted", False, f"{exc.status} {exc.code}: run `svc login` with a current key"))
    except DaemonUnreachable as exc:
        checks.append(Check("key accepted", False, str(exc)))
    version = health.get("version") if isinstance(health, dict) else None
    same = version == cli_version
    checks.append(Check("versions", same, f"daemon {version}, CLI {cli_version}" +
                        ("" if same else "; run `svc update` and restart the daemon (`svc daemon stop`)")))
    return checks


async def check_nodes(client: Client) -> Check:
    """Where sandboxes run: each node ready, active and reachable by the daemon, and what is placed on it."""
    try:
        answer = await client.call(R.LIST_NODES, timeout=10)
    except (DaemonUnreachable, ApiError) as exc:
        return Check("nodes", False, f"cannot list them: {exc}")
    nodes = answer.get("nodes") or []
    parts, bad = [], []
    for node in nodes:
        parts.append(f"{node['name']} {node['state']} ({node['cpus']:g} CPUs, {node['reserved_cpus']:g} reserved, "
                     f"{node['live_sandboxes']} sandboxes)")
        if node["state"] != "ready" or node["availability"] != "active":
            bad.append(f"{node['name']} is {node['state']}/{node['availability']}"
                       + (f" ({node['message']})" if node.get("message") else ""))
        elif not node["reachable"]:
            bad.append(f"{node['name']} has no engine URL in SERVICE_SWARM_NODES (nothing is placed there)")
    detail = f"{answer.get('runtime')}: " + ("; ".join(parts) or "none")
    if not nodes:
        return Check("nodes", False, detail + "; no node can run a sandbox")
    if bad:
        return Check("nodes", False, detail + "; " + "; ".join(bad) +
                     " (sandboxes go to the other nodes; a run on a lost node is retried there)")
    return Check("nodes", True, detail)


def _docker_checks() -> list[Check]:
    try:
        import docker
        from docker.errors import DockerException, ImageNotFound
    except ImportError:
        return [Check("Docker engine", False, "the docker Python package is missing; reinstall svc")]
    try:
        engine = docker.from_env(timeout=5)
        engine.ping()
    except DockerException as exc:
        return [Check("Docker engine", False, f"not reachable ({str(exc)[:120]}); start dockerd or set DOCKER_HOST")]
    checks = [Check("Docker engine", True, engine.version().get("Version", "?"))]
    from daemon.sandbox.images import STOCK_IMAGES

    missing = []
    for image in STOCK_IMAGES:
        try:
            engine.images.get(image)
        except ImageNotFound:
            missing.append(image)
        except DockerException as exc:
            missing.append(f"{image} ({str(exc)[:60]})")
    checks.append(Check("stock images", not missing, "all present" if not missing else f"missing {', '.join(missing)}; run `svc images build`"))
    return checks


def check_on_path() -> Check:
    found = shutil.which("svc")
    return Check("svc on PATH", bool(found), found or "not found: activate the venv svc is installed in, or add its bin/ to PATH")


def check_engine_log() -> Check | None:
    """The engine's last start dying in its network store (leftovers.py); None when no log is readable."""
    from client.setup.leftovers import NETWORK_STORE_FIX, engine_log, network_store_panic

    found = engine_log()
    if found is None:
        return None
    where, text = found
    panic = network_store_panic(text)
    if panic is None:
        return Check("engine log", True, f"no start-up panic in {where}")
    return Check("engine log", False, f"{where}: {panic[:160]}; {NETWORK_STORE_FIX}")


def check_leftovers(client: Client, daemon_running: bool, fix: bool) -> Check | None:
    """Engine objects of daemons that are gone (leftovers.py); with `fix`, removed (a failure to
    remove fails doctor; leftovers alone are a warning). None without the docker package."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError:
        return None
    from client.setup import leftovers

    home_daemon = leftovers.home_daemon_id(client.config.home)
    running = home_daemon if daemon_running and client.config.is_local else None
    try:
        api = docker.from_env(timeout=30).api
        found = leftovers.find(api, running, home_daemon)
    except DockerException as exc:
        return Check("leftovers", True, f"cannot list the engine's objects: {str(exc)[:120]}", warn=True)
    spared = f" (not touched: {'; '.join(found.spared)})" if found.spared else ""
    if not found.count():
        return Check("leftovers", True, "none on the engine" + spared)
    if not fix:
        return Check("leftovers", True, f"{found.summary()}: remove them with `svc doctor --fix`{spared}", warn=True)
    failed = leftovers.remove(api, found)
    if failed:
        return Check("leftovers", False, f"could not remove {len(failed)}: {'; '.join(failed[:3])}")
    return Check("leftovers", True, f"removed {found.summary()}{spared}")


async def run_checks(client: Client, project: Path, cli_version: str, fix: bool = False) -> list[Check]:
    checks = [check_env_files(project), check_key(client)]
    daemon = await check_daemon(client, cli_version)
    checks += daemon
    if daemon[0].ok:
        checks.append(await check_nodes(client))
    checks += await asyncio.to_thread(_docker_checks)
    engine_ok = any(c.name == "Docker engine" and c.ok for c in checks)
    log_check = await asyncio.to_thread(check_engine_log)
    if log_check is not None and (not engine_ok or not log_check.ok):
        checks.append(log_check)
    if engine_ok:
        leftover = await asyncio.to_thread(check_leftovers, client, daemon[0].ok, fix)
        if leftover is not None:
            checks.append(leftover)
    checks.append(check_on_path())
    return checks


