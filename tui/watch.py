"""Watch mode: re-run a spec whenever the spec or a file it references changes (a snapshot agent's
`source:` directory too: re-uploaded before the re-run).

Shared by the TUI (`w`) and the CLI (`svc watch SPEC.yaml`, `svc eval watch SPEC.yaml`). Changes come
from `watchfiles`, debounced (a burst of saves is one change); a run made stale by a newer change is
cancelled (`POST /v1/experiments/{id}/cancel`) before the next one starts. No Textual imports."""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import watchfiles

from client.agent_source import SKIP_DIRS, AgentSourceError, describe, sync_agent_source
from client.api import ApiError, Client, DaemonUnreachable
from client.local_spec import SpecFilesError, upload_spec_file
from client.routes import R
from client.typed import TypedApi
from tui.data import ExperimentDetail, spec_issues
from tui.spec_file import SpecFile, resolve_secrets

log = logging.getLogger("svc.watch")
DEBOUNCE_MS = 300
POLL_S = 1.0


@dataclass
class WatchEvent:
    kind: str  # watching | change | agent | started | progress | finished | cancelled | invalid | error
    message: str
    experiment_id: str | None = None
    detail: Any = None
    ts: float = field(default_factory=time.time)


class Launcher(Protocol):
    async def start(self, spec: Path) -> str: ...
    async def status(self, experiment_id: str) -> ExperimentDetail: ...
    async def cancel(self, experiment_id: str) -> None: ...


class InvalidSpec(Exception):
    def __init__(self, message: str, issues: list) -> None:
        super().__init__(message)
        self.issues = issues


def auto_name(record: dict, origin: str, now: float | None = None) -> str:
    """What an unnamed experiment is called: which spec version, started how and when
    (`quickstart v3 · watch 17:48`), so that a list of them says what changed."""
    version = f" v{record['version']}" if record.get("version") else ""
    return f"{record['id']}{version} · {origin} {time.strftime('%H:%M', time.localtime(now))}"


class ApiLauncher:
    """Resolve the spec's secrets locally, upload the agent's `source:` directory when it changed,
    upload the spec with its fixture files (a new version), create and run an experiment.

    The same steps as client/eval_flow.py's `start_spec_file`, but validation comes from the
    upload's 400 details instead of importing the daemon's spec models (the TUI never imports
    daemon/)."""

    def __init__(self, client: Client, *, name: str | None = None, replicas: int | None = None, concurrency: int | None = None,
                 matrix: list[dict] | None = None, dataset_version: int | None = None, origin: str = "watch"):
        self.client = client
        self.origin = origin  # names the experiment when no name is given: `spec v3 · watch 17:48`
        self.dataset_version = dataset_version  # None: the spec's parallelism.dataset version, else the latest
        self.name = name
        self.replicas = replicas
        self.concurrency = concurrency
        self.matrix = matrix  # None: the spec's own matrix
        self.synced: dict[str, Any] | None = None  # what the last start did with agent.source (client/agent_source.py)

    async def start(self, spec: Path) -> str:
        local = SpecFile.read(spec)
        if local.error:
            raise InvalidSpec(local.error, [])
        secrets, problems = resolve_secrets(local)
        if problems:
            raise InvalidSpec("; ".join(problems), [])
        self.synced = None
        try:  # agent.source: the agent's directory uploaded first when its content changed
            self.synced = await sync_agent_source(self.client, spec, local.doc.get("agent"))
        except AgentSourceError as exc:
            raise InvalidSpec(str(exc), []) from exc
        except ApiError as exc:
            if exc.status == 400:
                raise InvalidSpec(f"agent.source: the upload was refused: {exc.body.get('message', exc)}", []) from exc
            raise
        try:
            record = await upload_spec_file(self.client, spec, spec.stem)
        except SpecFilesError as exc:
            raise InvalidSpec(str(exc), []) from exc
        except ApiError as exc:
            if exc.status == 400:
                raise InvalidSpec(exc.body.get("message", "invalid spec"), spec_issues(exc.details)) from exc
            raise
        body: dict[str, Any] = {"name": self.name or auto_name(record, self.origin), "spec_id": record["id"],
                                "spec_version": record.get("version"), "secrets": secrets or None}
        body = {k: v for k, v in body.items() if v is not None}
        if self.replicas:
            body["replicas"] = self.replicas
        if self.concurrency:
            body["concurrency"] = self.concurrency
        if self.matrix:
            body["matrix"] = self.matrix
        if self.dataset_version:
            body["dataset_version"] = self.dataset_version
        created = await self.client.call(R.CREATE_EXPERIMENT, body=body)
        await self.client.call(R.RUN_EXPERIMENT, experiment_id=created["id"])
        return str(created["id"])

    async def status(self, experiment_id: str) -> ExperimentDetail:
        return ExperimentDetail.of(await TypedApi(self.client).experiment(experiment_id))

    async def cancel(self, experiment_id: str) -> None:
        try:
            await self.client.call(R.CANCEL_EXPERIMENT, experiment_id=experiment_id)
        except ApiError as exc:
            if exc.status != 409:  # already finished: nothing to cancel
                raise


class WatchEngine:
    def __init__(self, spec: Path, launcher: Launcher, *, debounce_ms: int = DEBOUNCE_MS,
                 on_event: Callable[[WatchEvent], None] | None = None, run_on_start: bool = True,
                 poll_s: float = POLL_S, force_polling: bool | None = None):
        self.spec = Path(spec).resolve()
        self.launcher = launcher
        self.debounce_ms = debounce_ms
        self.on_event = on_event
        self.run_on_start = run_on_start
        self.poll_s = poll_s
        self.force_polling = force_polling
        self.events: list[WatchEvent] = []
        self.runs: list[str] = []  # every experiment started, oldest first
        self.cancelled: list[str] = []
        self.finished: set[str] = set()
        self.current: str | None = None
        self._task: asyncio.Task | None = None
        self._starting: asyncio.Future | None = None
        self._stop = asyncio.Event()

    # --- what to watch ---------------------------------------------------------------------------
    def watched(self) -> tuple[set[Path], list[Path]]:
        """(files and directories that matter, directories to hand to watchfiles)."""
        targets = {self.spec, *SpecFile.read(self.spec).referenced_paths()}
        roots: list[Path] = []
        for target in targets:
            root = target if target.is_dir() else target.parent
            while not root.exists() and root != root.parent:
                root = root.parent
            if root not in roots:
                roots.append(root)
        return targets, roots

    @staticmethod
    def relevant(targets: set[Path], changed: str) -> bool:
        path = Path(changed).resolve()
        if SKIP_DIRS.intersection(path.parts):  # .git, __pycache__, .venv: never part of an upload
            return False
        return any(path == t or t in path.parents for t in targets)

    # --- running ---------------------------------------------------------------------------------
    def emit(self, kind: str, message: str, experiment_id: str | None = None, detail: Any = None) -> None:
        event = WatchEvent(kind, message, experiment_id, detail)
        self.events.append(event)
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a broken display must not stop the watching
                log.exception("watch event handler failed")

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Watch until `stop()`; the current run is cancelled on the way out."""
        if self.run_on_start:
            await self.trigger("start")
        try:
            while not self._stop.is_set():
                targets, roots = self.watched()
                self.emit("watching", f"watching {len(targets)} path(s): " + ", ".join(sorted(_short(t) for t in targets)), detail=sorted(map(str, targets)))
                restart = await self._watch_once(targets, roots)
                if not restart:
                    break
        finally:
            await self._cancel_current("watch stopped")

    async def _watch_once(self, targets: set[Path], roots: list[Path]) -> bool:
        """Yield changes until the set of referenced paths changes (True) or we are stopped (False)."""
        async for changes in watchfiles.awatch(
            *roots, stop_event=self._stop, debounce=max(1600, self.debounce_ms * 4), step=self.debounce_ms,
            force_polling=self.force_polling, poll_delay_ms=100, recursive=True,
            watch_filter=lambda _change, path: self.relevant(targets, path),
        ):
            paths = sorted({_short(Path(p)) for _, p in changes})
            self.emit("change", "changed: " + ", ".join(paths), detail=paths)
            await self.trigger("change")
            new_targets, _ = self.watched()
            if new_targets != targets:
                return True
        return False

    async def trigger(self, reason: str) -> None:
        """Cancel a run made stale, then start a fresh one (following it in the background)."""
        await self._cancel_current("stale: a newer change arrived")
        self._task = asyncio.create_task(self._run_one(reason))

    async def _cancel_current(self, why: str) -> None:
        task, starting = self._task, self._starting
        self._task = self._starting = None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        experiment = self.current
        if experiment is None and starting is not None:
            try:  # a start in flight finishes first, so its experiment can be cancelled, not orphaned
                experiment = await starting
            except (asyncio.CancelledError, Exception):
                experiment = None
        self.current = None
        if experiment is None or experiment in self.finished:
            return
        try:
            await self.launcher.cancel(experiment)
            self.cancelled.append(experiment)
            self.emit("cancelled", f"cancelled {experiment} ({why})", experiment)
        except (ApiError, DaemonUnreachable) as exc:
            self.emit("error", f"could not cancel {experiment}: {exc}", experiment)

    async def _run_one(self, reason: str) -> None:
        self._starting = asyncio.ensure_future(self.launcher.start(self.spec))
        try:
            experiment = await asyncio.shield(self._starting)
        except InvalidSpec as exc:
            self.emit("invalid", f"spec invalid, not started: {exc}", detail=exc.issues)
            return
        except (ApiError, DaemonUnreachable, OSError) as exc:
            self.emit("error", f"could not start a run: {exc}")
            return
        self._starting = None
        synced = getattr(self.launcher, "synced", None)
        if synced:
            self.emit("agent", describe(synced))
        self.current = experiment
        self.runs.append(experiment)
        self.emit("started", f"started {experiment} ({reason})", experiment)
        last = None
        while True:
            try:
                detail = await self.launcher.status(experiment)
            except (ApiError, DaemonUnreachable) as exc:
                self.emit("error", f"lost track of {experiment}: {exc}", experiment)
                await asyncio.sleep(self.poll_s)
                continue
            row = detail.row
            summary = (row.status, row.done, row.total)
            if summary != last:
                last = summary
                self.emit("progress", f"{experiment}: {row.status} {row.done or 0}/{row.total or '?'}", experiment, detail)
            if row.terminal:
                counts = _verdict_counts(detail)
                self.current = None
                self.finished.add(experiment)
                self.emit("finished", f"{experiment} {row.status}: {counts}", experiment, detail)
                return
            await asyncio.sleep(self.poll_s)


def _verdict_counts(detail: ExperimentDetail) -> str:
    counts: dict[str, int] = {}
    for scenario in detail.scenarios:
        counts[scenario.status] = counts.get(scenario.status, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no scenarios"


def _short(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)
