"""What a check needs: the sandbox (its handle, daemon.sandbox.handle.Sandbox), the spec, the
secrets (to redact evidence), the judge configuration, and the agent's captured output."""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from daemon.judges.client import JudgeConfig  # noqa: F401  (the runner builds it; re-exported)
from daemon.sandbox.toolset import tool
from daemon.scoring.checks.results import CheckOutcome, CheckStatus

if TYPE_CHECKING:
    from daemon.sandbox.handle import Sandbox
    from daemon.sandbox.models import ExecResult

DEFAULT_CHECK_TIMEOUT_S = 60.0
AUDIT_SETTLE_S = 0.2  # as the runner waits for the egress proxy's last records after the agent
EVIDENCE_TAIL = 2000


@dataclass
class CheckContext:
    sandbox: Sandbox
    spec: Any
    secrets: dict[str, str] = field(default_factory=dict)
    judge: JudgeConfig | None = None
    task_prompt: str = ""
    agent_output: str = ""
    changed_files: list[str] = field(default_factory=list)
    redact: Callable[[str], str] = lambda text: text
    # A dataset scenario's record `expected` (experiments over a dataset): the value
    # `{{ expected.KEY }}` in check parameters reads, and the file command checks are told of.
    expected: Any = None
    expected_file: str | None = None
    # The audit events of the agent's window (what forbidden rules read); None: read by
    # `agent_audit_events` from the sandbox's audit since it became ready.
    agent_audit: Any = None  # list[dict[str, Any]] | None

    async def agent_audit_events(self) -> list[dict[str, Any]]:
        """The agent's audit events: `agent_audit` when the runner gave them, else the sandbox's audit
        events since it became ready (after its setup commands), read after a flush, so the
        proxies' and databases' last records are in. Without the runner's window an earlier check's
        own calls and writes count too, and in a sandbox reused by several runs, earlier runs'."""
        if self.agent_audit is not None:
            return list(self.agent_audit)
        import asyncio

        await asyncio.sleep(AUDIT_SETTLE_S)  # the egress proxy's log of the last calls
        await self.sandbox.flush_audit()
        since = int(getattr(self.sandbox.runtime, "ready_audit_mark", 0) or 0)
        return await asyncio.to_thread(self.sandbox.audit().events, since)

    async def exec(self, command: str, timeout_s: float | None, isolation: str = "agent") -> ExecResult:
        """`command` through the daemon's own shell (daemon/sandbox/verifier.py), in the agent's
        container or, `isolation: clean`, in a fresh verifier container."""
        env = {"SERVICE_EXPECTED_FILE": self.expected_file} if self.expected_file else None
        return await self.sandbox.check_exec(command, timeout_s=timeout_s or DEFAULT_CHECK_TIMEOUT_S, env=env,
                                             clean=isolation == "clean")

    def tail(self, text: str | bytes | None, limit: int = EVIDENCE_TAIL) -> str:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        text = self.redact(text or "")
        return text if len(text) <= limit else "…" + text[-limit:]

    async def read_file(self, path: str, limit: int | None = None) -> bytes | None:
        """A workspace file's bytes (None when absent). Read through the sandbox's workspace seam
        without following links (workspace.open_under: every component O_NOFOLLOW, regular files only, so a FIFO or device
        the agent left is never opened and a link never leads to a host file); a path through a
        symbolic link is read inside the sandbox instead, where the link means what the agent
        meant and only the container's files are reachable."""
        from daemon.sandbox.workspace import FileMissing, NotRegularFile, PathError, normalize

        rel = normalize(path)
        try:
            return await self.sandbox.read_file(rel, limit)
        except FileMissing:
            return None
        except FileNotFoundError:
            return None
        except NotRegularFile:
            return None
        except PathError:
            result = await self.sandbox.check_exec(f"{tool('cat')} -- {shlex.quote('/workspace/' + rel)}", timeout_s=30)
            if result.exit_code != 0:
                return None
            data = result.stdout.encode() if isinstance(result.stdout, str) else result.stdout
            return data if limit is None else data[:limit]

    async def exists(self, path: str) -> bool:
        """Looked up on the host from the workspace root without following links; a path through
        a symbolic link is tested inside the sandbox (`test -e`), where the link means what the
        agent meant."""
        import stat

        from daemon.sandbox.workspace import PathError, normalize

        rel = normalize(path)
        try:
            st = await self.sandbox.lstat(rel)
        except PathError:
            st = None
            through_link = True
        else:
            through_link = st is not None and stat.S_ISLNK(st.st_mode)
        if through_link:
            result = await self.sandbox.check_exec(f"{tool('test')} -e {shlex.quote('/workspace/' + rel)}", timeout_s=30)
            return result.exit_code == 0
        return st is not None


def outcome(status: CheckStatus, evidence: dict[str, Any], score: float | None = None) -> CheckOutcome:
    return CheckOutcome(status=status, evidence=evidence, score=score)
