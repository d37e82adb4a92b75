"""Small shared types of the sandbox package: limits, `ExecResult`, `BootFailure`."""
from __future__ import annotations

import hashlib
import shlex
from dataclasses import asdict, dataclass
from typing import Any


DEFAULT_TIMEOUT_S = 30 * 60.0
DEFAULT_COMMAND_TIMEOUT_S = 10 * 60.0
DEFAULT_CPUS = 1.0
DEFAULT_MEMORY = 1024**3
DEFAULT_PIDS = 512
DEFAULT_DISK = 2 * 1024**3


@dataclass
class Limits:
    """Per-sandbox limits (DECISIONS: 1 CPU, 1 GiB, 512 pids, 2 GiB workspace, 30m timeout)."""

    cpus: float = DEFAULT_CPUS
    memory: int = DEFAULT_MEMORY
    pids: int = DEFAULT_PIDS
    disk: int = DEFAULT_DISK
    timeout: float = DEFAULT_TIMEOUT_S

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class BootFailure(Exception):
    """A boot step failed; `message` tells the user what to fix (it never holds a secret value)."""

    def __init__(self, step: str, message: str):
        super().__init__(f"{step}: {message}")
        self.step = step
        self.message = message


@dataclass
class ExecResult:
    """The outcome of a command run in a sandbox (or in one of its service containers).

    `stdout`/`stderr` are decoded (UTF-8, invalid bytes replaced) and capped at 1 MiB each; a
    capped stream ends with a `[svc] output truncated` marker. `timed_out` means the command ran
    past its timeout and was killed; `oom_killed` that the kernel killed it for exceeding the
    sandbox's memory limit. Both also add a `[svc] ...` line to `stderr`. `exit_code` is None for
    a background command (it is still running)."""

    command: str
    stdout: str
    stderr: str
    exit_code: int | None
    duration_ms: int
    timed_out: bool = False
    oom_killed: bool = False
    background: bool = False
    engine_lost: bool = False  # the daemon's connection to the engine broke while it ran (RawExec.stream_broken)

    def as_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body.pop("engine_lost")  # the daemon's own observation (retries), not part of a command's answer
        return body


def command_text(command: str | list[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def derive(seed: str, label: str, length: int = 24) -> str:
    """A value generated for this sandbox, a pure function of its seed (same seed, same value)."""
    return hashlib.sha256(f"{seed}\x00{label}".encode()).hexdigest()[:length]


def env_key(name: str) -> str:
    """`SERVICE_SERVICE_<NAME>_...` form of a service name: upper case, '-' -> '_'."""
    return "".join(c if c.isalnum() else "_" for c in name).upper()
