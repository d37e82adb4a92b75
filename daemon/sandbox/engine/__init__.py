"""The container engine behind sandboxes: the `SandboxDriver` protocol, what goes in and out of it
(`ContainerSpec`, `ContainerInfo`, `RawExec`) and its errors. Implementations: `engine.docker`
(the local engine) and `engine.swarm` (a Docker Swarm); `engine.select` picks one from the settings.
Nothing here knows of workspaces, boot or the manager: every other module of the sandbox package
sits above this one.

Everything an engine creates carries the labels it is given; the manager always passes
`svc.sandbox`, `svc.tenant` and `svc.daemon` so a restarted daemon can find and reap orphans. That
includes volumes: a VOLUME the image declares is a named volume carrying the container's labels
(never an anonymous one, which no label could name), removed with its sandbox.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

OUTPUT_CAP_BYTES = 1024 * 1024


class RuntimeUnavailable(Exception):
    """The container engine cannot be reached."""


def connection_failure(exc: BaseException) -> bool:
    """Whether `exc` is the daemon's connection to the engine failing (unreachable, broken, timed
    out): the engine gave no answer at all. Decided by type, never by the message's words."""
    if isinstance(exc, (RuntimeUnavailable, ConnectionError, TimeoutError)):
        return True
    try:
        import requests.exceptions
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return False
    return isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout)


def engine_failure(exc: BaseException) -> bool:
    """Whether `exc` is the daemon's own call to the engine failing: no answer (`connection_failure`)
    or an engine-side 5xx. A 5xx also comes from a container stopping under the call: where the agent
    could have stopped it, ask the engine for the container's state first."""
    if connection_failure(exc):
        return True
    try:
        import docker.errors
    except ImportError:  # pragma: no cover - the SDK is a dependency
        return False
    if isinstance(exc, docker.errors.APIError) and not isinstance(exc, docker.errors.NotFound):
        return (exc.status_code or 0) >= 500
    return False


class ImageUnavailable(Exception):
    """The image is not present locally and could not be pulled."""


CONTAINER_LOG_BYTES = 8 * 1024 * 1024  # the engine's log of one container (json-file, one file)


@dataclass
class ContainerSpec:
    """What to run. `binds` maps a host path to (container path, "ro" | "rw")."""

    name: str
    image: str
    command: list[str] | None = None
    entrypoint: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    network: str | None = None
    aliases: list[str] = field(default_factory=list)
    binds: dict[str, tuple[str, str]] = field(default_factory=dict)
    working_dir: str | None = None
    user: str | None = None
    hostname: str | None = None
    init: bool = False
    nano_cpus: int | None = None
    mem_limit: int | None = None
    pids_limit: int | None = None
    extra_hosts: dict[str, str] = field(default_factory=dict)
    tmpfs: dict[str, str] = field(default_factory=dict)
    ipv4_address: str | None = None  # a fixed address on `network` (needs a network with a subnet)
    extra_networks: dict[str, list[str]] = field(default_factory=dict)  # more networks -> aliases, joined after start
    ports: dict[int, tuple[str, int | None]] = field(default_factory=dict)  # container port -> (host ip, host port or None)
    # Container paths of `rw` binds that the container only appends to and the daemon reads while it
    # runs (the agent's trace drop): on a swarm, brought back by `collect` without waiting for a command's end.
    outputs: list[str] = field(default_factory=list)
    # Docker's embedded DNS on an `internal` network (engine 20.10) never answers names it cannot
    # resolve locally: without these a lookup of an outside name hangs for 20s before failing.
    dns_opt: list[str] = field(default_factory=lambda: ["timeout:1", "attempts:1"])


@dataclass
class ContainerInfo:
    id: str
    name: str
    pid: int | None = None
    ip: str | None = None


@dataclass
class RawExec:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    duration_s: float = 0.0
    killed_by_watchdog: bool = False
    # the daemon's own connection to the engine broke while the command ran (an engine restart or
    # disconnect): observed by the daemon, which no command can fake
    stream_broken: bool = False


class SandboxDriver(Protocol):
    """The runtime operations the sandbox manager needs. `DockerDriver` is the implementation."""

    runtime: str

    async def ping(self) -> None: ...
    async def ensure_image(self, ref: str) -> None: ...
    async def has_image(self, ref: str) -> bool: ...
    async def create_network(self, name: str, labels: dict[str, str], internal: bool = True,
                             subnet: str | None = None, gateway: str | None = None) -> str: ...
    async def remove_network(self, name_or_id: str) -> None: ...
    async def network_bridge(self, name_or_id: str) -> str: ...
    async def network_endpoints(self, name_or_id: str) -> int: ...
    async def run_container(self, spec: ContainerSpec, inspect: bool = False) -> ContainerInfo: ...
    async def remove_container(self, id_or_name: str) -> None: ...
    async def container_state(self, id_or_name: str) -> dict[str, Any] | None: ...
    async def logs(self, id_or_name: str, tail: int = 40) -> str: ...
    async def output(self, id_or_name: str, stream: str, keep_bytes: int) -> bytes: ...
    async def exec(self, container: str, argv: list[str], *, env: dict[str, str] | None = None, workdir: str | None = None,
                   user: str | None = None, detach: bool = False, watchdog_s: float | None = None,
                   output_cap: int = OUTPUT_CAP_BYTES) -> RawExec: ...
    async def put_file(self, container: str, path: str, data: bytes, mode: int = 0o644) -> None: ...
    async def oom_kill_count(self, container_id: str) -> int | None: ...
    async def published_ports(self, container_id: str) -> dict[int, tuple[str, int]]: ...
    def listening_ports(self, pid: int) -> set[int] | None: ...
    async def process_count(self, container_id: str) -> int | None: ...
    def room_for(self, nano_cpus: int, memory: int) -> bool: ...
    async def list_labelled(self, labels: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]: ...
    async def list_volumes(self, labels: dict[str, str]) -> list[dict[str, Any]]: ...
    async def sandbox_remains(self, sandbox_id: str, daemon_id: str) -> tuple[list[str], list[str]]: ...
    async def remove_volume(self, name: str) -> None: ...
    def concurrency(self, local_limit: int, cap: int) -> int: ...
    async def nodes(self) -> list[dict[str, Any]]: ...
    def node_of(self, container_id: str) -> str | None: ...
    async def close(self) -> None: ...
