"""Backing services: from a spec's `services:` (or shape A's list of names) to container plans, and
the readiness wait that turns a started container into a ready service.

Types and their defaults:

| type      | image                        | port | ready when                                   |
|-----------|------------------------------|------|----------------------------------------------|
| postgres  | localhost/svc/postgres:15    | 5432 | port listening and `pg_isready` answers      |
| redis     | localhost/svc/redis:7        | 6379 | port listening                               |
| http_mock | localhost/svc/python:3.11    | 80   | port listening                               |
| generic   | (required)                   | -    | `wait_for` / `healthcheck`, else first port, else started |

A spec's `wait_for` (port and/or log line, with its timeout) and `healthcheck` (command, interval,
retries) replace the defaults. Listening ports are read from `/proc/<pid>/net/tcp{,6}` on the host
(no exec, no tools needed in the image), falling back to `cat /proc/net/tcp` inside the container.

Postgres gets `POSTGRES_USER=postgres`, `POSTGRES_DB=postgres` and a password derived from the
sandbox seed unless the spec's `env` sets them. The agent sees every service as
`SERVICE_SERVICE_<NAME>_HOST` / `_PORT` (plus `_USER`, `_PASSWORD`, `_DB`, `_URL` for postgres and
`_URL` for redis and http_mock). Under the db audit (`audit.db_writes` or
`forbidden.db_writes_outside`) a postgres service's `_USER` / `_PASSWORD` / `_URL` are those of the
non-superuser role `agent` instead (db_audit.py).
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.sandbox.db_audit import AGENT_ROLE
from daemon.sandbox.engine import ContainerInfo, SandboxDriver
from daemon.sandbox.models import BootFailure, derive, env_key

if TYPE_CHECKING:
    from daemon.spec.services import Service

PYTHON_IMAGE = "localhost/svc/python:3.11"
POSTGRES_IMAGE = "localhost/svc/postgres:15"
REDIS_IMAGE = "localhost/svc/redis:7"
PROGRAMS_DIR = Path(__file__).resolve().parent / "programs"
DEFAULT_WAIT_S = 60.0
SHAPE_A_SERVICES = ("postgres", "redis", "http_mock")


@dataclass
class ServicePlan:
    name: str
    type: str
    image: str
    env: dict[str, str] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    wait_port: int | None = None
    wait_log: str | None = None
    wait_timeout: float = DEFAULT_WAIT_S
    health_command: str | None = None
    health_interval: float = 0.1
    health_retries: int = 600
    # log lines that, in this order, prove what the health command would (read without an exec)
    ready_log: tuple[str, ...] = ()
    record: bool = False
    routes: list[dict[str, Any]] = field(default_factory=list)
    agent_env: dict[str, str] = field(default_factory=dict)
    binds: dict[str, tuple[str, str]] = field(default_factory=dict)
    user: str | None = None  # for psql in fixtures and sql checks
    database: str | None = None
    agent_password: str | None = None  # postgres: the `agent` role's, under the db audit
    audited_env: dict[str, str] = field(default_factory=dict)  # agent_env under the db audit
    check_user: str | None = None  # postgres under the db audit: the sql checks' read-only role

    @property
    def primary_port(self) -> int | None:
        return self.ports[0] if self.ports else None

    def describe_wait(self) -> str:
        parts = []
        if self.wait_port:
            parts.append(f"port {self.wait_port}")
        if self.wait_log:
            parts.append(f"log line {self.wait_log!r}")
        if self.health_command:
            parts.append(f"healthcheck `{self.health_command}`")
        return " and ".join(parts) or "the container to start"


def plan_services(spec_services: list[Any] | None, names: list[str] | None, seed: str, mock_root: Path) -> list[ServicePlan]:
    """Plans for a spec's services, or for shape A's names (each one of SHAPE_A_SERVICES)."""
    plans: list[ServicePlan] = []
    if spec_services:
        for svc in spec_services:
            plans.append(_plan_from_spec(svc, seed, mock_root))
    for name in names or []:
        if name not in SHAPE_A_SERVICES:
            raise ValueError(f"unknown service '{name}': shape A services are {', '.join(SHAPE_A_SERVICES)}")
        plans.append(_plan(name, name, None, {}, [], None, seed, mock_root))
    return plans


def _plan_from_spec(svc: Service, seed: str, mock_root: Path) -> ServicePlan:
    routes = [r.model_dump(mode="python") for r in getattr(svc, "routes", [])]
    plan = _plan(svc.name, svc.type, getattr(svc, "image", None), dict(svc.env), list(svc.ports), svc.command, seed, mock_root,
                 record=svc.record, routes=routes)
    if svc.wait_for is not None:
        plan.wait_port = svc.wait_for.port
        plan.wait_log = svc.wait_for.log
        plan.wait_timeout = svc.wait_for.timeout
    if svc.healthcheck is not None:
        plan.health_command = svc.healthcheck.command
        plan.health_interval = svc.healthcheck.interval
        plan.health_retries = svc.healthcheck.retries
    return plan


def _plan(name: str, type_: str, image: str | None, env: dict[str, str], ports: list[int], command: list[str] | None,
          seed: str, mock_root: Path, record: bool = False, routes: list[dict[str, Any]] | None = None) -> ServicePlan:
    key = env_key(name)
    prefix = f"SERVICE_SERVICE_{key}_"
    if type_ == "postgres":
        env.setdefault("POSTGRES_USER", "postgres")
        env.setdefault("POSTGRES_DB", "postgres")
        env.setdefault("POSTGRES_PASSWORD", derive(seed, f"service:{name}:postgres-password"))
        port = ports[0] if ports else 5432
        plan = ServicePlan(name, type_, image or POSTGRES_IMAGE, env, [port], command, wait_port=port,
                           health_command=f"pg_isready -q -h 127.0.0.1 -p {port} -U {env['POSTGRES_USER']} -d {env['POSTGRES_DB']}",
                           user=env["POSTGRES_USER"], database=env["POSTGRES_DB"])
        # The entrypoint's init server listens on the Unix socket only; the real one logs a TCP
        # listener and then that it accepts connections: pg_isready's answer, without its exec.
        plan.ready_log = ("listening on IPv", "database system is ready to accept connections")
        plan.agent_env = {
            prefix + "USER": env["POSTGRES_USER"],
            prefix + "PASSWORD": env["POSTGRES_PASSWORD"],
            prefix + "DB": env["POSTGRES_DB"],
            prefix + "URL": f"postgresql://{env['POSTGRES_USER']}:{env['POSTGRES_PASSWORD']}@{name}:{port}/{env['POSTGRES_DB']}",
        }
        # under the db audit the agent logs in as its own non-superuser role (db_audit.py)
        plan.agent_password = password = derive(seed, f"service:{name}:agent-password")
        plan.audited_env = {
            prefix + "USER": AGENT_ROLE,
            prefix + "PASSWORD": password,
            prefix + "DB": env["POSTGRES_DB"],
            prefix + "URL": f"postgresql://{AGENT_ROLE}:{password}@{name}:{port}/{env['POSTGRES_DB']}",
        }
    elif type_ == "redis":
        port = ports[0] if ports else 6379
        plan = ServicePlan(name, type_, image or REDIS_IMAGE, env, [port], command, wait_port=port)
        plan.agent_env = {prefix + "URL": f"redis://{name}:{port}/0"}
    elif type_ == "http_mock":
        port = ports[0] if ports else 80
        mock_dir = mock_root / name
        config = {"port": port, "record": record, "record_file": "/svc-mock/requests.jsonl", "routes": routes or []}
        env["SVC_MOCK_CONFIG"] = json.dumps(config, separators=(",", ":"), default=str)
        plan = ServicePlan(name, type_, image or PYTHON_IMAGE, env, [port],
                           command or ["python3", "-u", "/svc-programs/http_mock.py"],
                           wait_port=port, record=record, routes=routes or [])
        plan.binds = {str(PROGRAMS_DIR): ("/svc-programs", "ro")}
        # A container whose image or command the tenant chose gets no host directory it could
        # plant a link, FIFO or device in: its record stays inside it and is read with an exec.
        if image is None and command is None:
            plan.binds[str(mock_dir)] = ("/svc-mock", "rw")
        plan.agent_env = {prefix + "URL": f"http://{name}:{port}" if port != 80 else f"http://{name}"}
    else:
        if image is None:
            raise ValueError(f"service '{name}' needs an image")
        plan = ServicePlan(name, "generic", image, env, list(ports), command, wait_port=ports[0] if ports else None)
    common = {prefix + "HOST": name, **({prefix + "PORT": str(plan.primary_port)} if plan.primary_port else {})}
    plan.agent_env = {**common, **plan.agent_env}
    if plan.audited_env:
        plan.audited_env = {**common, **plan.audited_env}
    return plan


MOCK_RECORD_FILE = "/svc-mock/requests.jsonl"


def mock_record_on_host(plan: ServicePlan) -> bool:
    """Whether the mock's record is in a host directory (the stock mock) or only in its container."""
    return any(target == "/svc-mock" for target, _ in plan.binds.values())


async def wait_ready(driver: SandboxDriver, plan: ServicePlan, info: ContainerInfo, log_tail: int = 15) -> float:
    """Wait until the service is ready; BootFailure naming the service when it is not within its
    timeout or when its container exits. Returns the seconds waited."""
    started = time.monotonic()
    deadline = started + plan.wait_timeout
    delay = 0.02
    last_state_check = 0.0
    proc_readable = True
    health_attempts = 0
    health_last: str = ""
    stage = "port" if plan.wait_port else "log" if plan.wait_log else "health" if plan.health_command else "done"

    async def fail(reason: str) -> None:
        logs = (await driver.logs(info.id, tail=log_tail)).strip()
        tail = ("; last log lines:\n" + logs) if logs else ""
        raise BootFailure("services", f"service '{plan.name}' ({plan.image}) {reason}{tail}")

    async def fail_if_exited() -> None:
        state = await driver.container_state(info.id)
        if state is None or not state.get("Running"):
            code = state.get("ExitCode") if state else "?"
            await fail(f"exited with code {code} before it was ready")

    async def probe(argv: list[str], watchdog_s: float) -> Any:
        # The container may exit between the last state check and this exec (the engine then refuses it).
        try:
            return await driver.exec(info.id, argv, watchdog_s=watchdog_s)
        except Exception:
            await fail_if_exited()
            raise

    while stage != "done":
        now = time.monotonic()
        if now > deadline:
            await fail(f"was not ready within {plan.wait_timeout:g}s (waiting for {plan.describe_wait()}); "
                       "raise wait_for.timeout or check the service's configuration")
        if now - last_state_check > 0.5 or not proc_readable:
            last_state_check = now
            await fail_if_exited()
        if stage == "port":
            ports = driver.listening_ports(info.pid) if info.pid and proc_readable else None
            if ports is None:
                proc_readable = False
                raw = await probe(["cat", "/proc/net/tcp", "/proc/net/tcp6"], watchdog_s=5)
                ports = _parse_proc_tcp(raw.stdout.decode("utf-8", "replace"))
            if plan.wait_port in ports:
                stage = "log" if plan.wait_log else "health" if plan.health_command else "done"
                delay = 0.02
                continue
        elif stage == "log":
            logs = await driver.logs(info.id, tail=2000)
            if plan.wait_log is not None and plan.wait_log in logs:
                stage = "health" if plan.health_command else "done"
                continue
        elif stage == "health":
            if plan.ready_log and in_order(await driver.logs(info.id, tail=200), plan.ready_log):
                stage = "done"
                continue
            health_attempts += 1
            raw = await probe(["sh", "-c", plan.health_command or "true"], watchdog_s=max(5.0, plan.health_interval * 5))
            if raw.exit_code == 0:
                stage = "done"
                continue
            health_last = (raw.stderr or raw.stdout).decode("utf-8", "replace").strip()[-300:]
            if health_attempts >= plan.health_retries:
                await fail(f"healthcheck `{plan.health_command}` did not pass after {health_attempts} attempts"
                           f" (last exit code {raw.exit_code}{': ' + health_last if health_last else ''})")
            await asyncio.sleep(plan.health_interval)
            continue
        await asyncio.sleep(delay)
        # the port is read from /proc on the host (no exec), so polling it often costs little and
        # every 0.1 s of polling period is 0.05 s of boot time on average
        delay = min(delay * 1.5, 0.05 if stage == "port" and proc_readable else 0.2)
    return time.monotonic() - started


def in_order(text: str, lines: tuple[str, ...]) -> bool:
    """Whether each of `lines` occurs in `text`, each after the one before."""
    at = 0
    for line in lines:
        found = text.find(line, at)
        if found < 0:
            return False
        at = found + len(line)
    return True


def _parse_proc_tcp(text: str) -> set[int]:
    ports = set()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
            try:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            except ValueError:
                pass
    return ports
