"""Sandboxes: create, read, commands, files, workspace state and diff, timeout, lifecycle events."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from daemon.contract.common import EnvCheck, JsonValue, NoNul, PageQuery, Response

# Every sandbox carries both vocabularies: the lifecycle `state` and its shape A `status`.
STATE_TO_STATUS = {
    "creating": "provisioning",
    "ready": "ready",
    "running": "running",
    "stopped": "stopped",
    "error": "failed",
}
STATUS_TO_STATE = {v: k for k, v in STATE_TO_STATUS.items()}
LIVE_STATES = ("creating", "ready", "running")

_STATUS = "|".join([*STATE_TO_STATUS.values(), "creating", "error"])
STATUS_FILTER_PATTERN = rf"^(?:active|all| *(?:{_STATUS}) *(?:, *(?:{_STATUS}) *)*)$"


def _str_seed(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Duration = str | float | int
MAX_DURATION_S = 366 * 24 * 3600


class SandboxCreate(BaseModel):
    """Shape A: `image` (+ `services`, `seed`). Shape B: `spec_id` (+ `spec_version`, `timeout`,
    `metadata`, `secrets`, `seed`). Both `image` and `spec_id` at once is a 400. The daemon resolves
    only the `secrets` sent here and `dashboard` ones; fixture files come from the spec upload."""

    model_config = ConfigDict(extra="forbid")
    image: Annotated[str | None, NoNul] = Field(default=None, description="fully-qualified base image (shape A)")
    services: list[str] | None = Field(default=None, description="shape A backing services: postgres, redis, http_mock")
    seed: Annotated[str | None, BeforeValidator(_str_seed), NoNul] = Field(default=None, max_length=200)
    spec_id: str | None = Field(default=None, description="boot the spec's whole sandbox (shape B)")
    spec_version: int | None = Field(default=None, ge=1)
    timeout: Duration | None = Field(default=None, description="sandbox life, e.g. '10m' (default: spec resources.timeout, else 30m)")
    metadata: dict[str, JsonValue] | None = None
    secrets: Annotated[dict[str, str] | None, EnvCheck] = Field(default=None, description="secret values by name (never stored or returned)")
    env: Annotated[dict[str, str] | None, EnvCheck] = Field(default=None, description="extra environment for the sandbox's processes")


class SandboxError(Response):
    step: str | None
    message: str | None


class SandboxBoot(Response):
    pooled: bool = Field(description="served from the warm pool (daemon/sandbox/pool.py) instead of booted cold")
    ms: float = Field(description="milliseconds from the create request to ready")


class Sandbox(Response):
    id: str
    status: Literal["provisioning", "ready", "running", "stopped", "failed"]
    state: Literal["creating", "ready", "running", "stopped", "error"]
    image: str | None
    services: list[str]
    seed: str
    spec_id: str | None
    spec_version: int | None
    metadata: dict[str, Any]
    resources: dict[str, Any]
    secrets: list[str] = Field(description="names of the sandbox's secrets (values are never returned)")
    limits_exceeded: list[str]
    created_at: str
    ready_at: str | None
    expires_at: str | None
    stopped_at: str | None
    stop_reason: str | None
    error: SandboxError | None
    boot: SandboxBoot | None = Field(description="how the sandbox booted; null until it is ready (or when it failed)")
    node: str | None = Field(default=None, description="the node its agent container runs on: a swarm node's hostname, "
                                                       "`local` on the daemon's own engine; null until it is ready")


class Node(Response):
    name: str = Field(description="the node's hostname; `local` for the daemon's own engine")
    role: Literal["local", "manager", "worker"]
    state: str = Field(description="the engine's word: ready, down, disconnected, unknown")
    availability: str = Field(description="active, pause or drain (swarm); active locally")
    message: str | None = Field(description="why the node is not ready, as the manager says")
    reachable: bool = Field(description="the daemon has the engine URL of this node (SERVICE_SWARM_NODES): only such "
                                        "nodes are given sandboxes")
    cpus: float
    memory_bytes: int
    reserved_cpus: float = Field(description="the CPU limits of the agents of the live sandboxes placed on it (every "
                                             "tenant's for an admin key, the caller's own otherwise)")
    reserved_memory_bytes: int = Field(description="their memory limits, counted the same way")
    live_sandboxes: int = Field(description="how many live sandboxes are placed on it, counted the same way")
    sandboxes: list[str] = Field(description="ids of the caller's live sandboxes placed on it")


class NodeList(Response):
    runtime: str = Field(description="the engine the daemon runs sandboxes on: docker or swarm")
    nodes: list[Node]


class CommandRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    command: Annotated[str | list[str], NoNul] = Field(description="a shell command (run with sh -c) or an argument list")
    timeout: Duration | None = Field(default=None, description="e.g. '30s' (default 10m, at most the sandbox's remaining life)")
    background: bool = False
    env: Annotated[dict[str, str] | None, EnvCheck] = None
    workdir: Annotated[str, NoNul] = "/workspace"
    user: Annotated[str | None, NoNul] = None


class CommandResult(Response):
    command: str
    stdout: str
    stderr: str
    exit_code: int | None
    duration_ms: int
    timed_out: bool
    oom_killed: bool
    background: bool


class FileWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1)
    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"


class FileInfo(Response):
    path: str
    size: int
    sha256: str


class TimeoutRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    timeout: Duration


class FileEntry(Response):
    path: str
    size: int
    sha256: str
    mode: str
    type: str | None = None


class WorkspaceState(Response):
    sandbox_id: str
    root: str
    taken_at: str
    files: list[FileEntry]


class WorkspaceDiff(Response):
    sandbox_id: str
    since: str | None
    added: list[dict[str, Any]]
    modified: list[dict[str, Any]]
    deleted: list[dict[str, Any]]



class SandboxListQuery(PageQuery):
    status: str | None = Field(
        default=None, pattern=STATUS_FILTER_PATTERN,
        description="provisioning|ready|running|stopped|failed or creating|error (comma-separated), active (default) or all")
    spec_id: str | None = Field(default=None, description="only sandboxes of this spec")


class SandboxEvent(Response):
    """One lifecycle stream event (an SSE `data:` line): `status` steps, `command`, `audit`, `trace`."""
    event_type: str
    data: dict[str, Any]
