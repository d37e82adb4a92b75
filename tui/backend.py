"""Async fetchers the screens call: one method per question the TUI asks the daemon. Answers come
back as the typed rows of `tui.data`; transport failures come back as `DaemonUnreachable`."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, TypeVar

import aiohttp

from client.api import ApiError, Client, DaemonUnreachable
from client.routes import R
from client.typed import TypedApi
from tui import data as d

if TYPE_CHECKING:
    from daemon.contract.sandboxes import NodeList, SandboxEvent

__all__ = ["Backend", "ApiError", "DaemonUnreachable"]

T = TypeVar("T")
_TRANSPORT = (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, FileNotFoundError)


class Backend:
    def __init__(self, client: Client, list_limit: int = 500):
        self.client = client
        self.api = TypedApi(client)
        self.list_limit = list_limit

    async def typed(self, call: Awaitable[T]) -> T:
        """A typed client call, with transport failures as DaemonUnreachable."""
        try:
            return await call
        except (ApiError, DaemonUnreachable):
            raise
        except _TRANSPORT as exc:
            raise DaemonUnreachable(f"lost svcd: {exc.__class__.__name__}: {exc}") from exc

    async def call(self, route: Any, **kw: Any) -> Any:
        """One route of the table (client.call), with transport failures as DaemonUnreachable."""
        return await self.typed(self.client.call(route, **kw))

    async def reset(self) -> None:
        """Drop pooled connections (after a daemon restart)."""
        try:
            await self.client.close()
        except Exception:
            pass

    # --- health --------------------------------------------------------------------------------
    async def health(self) -> dict:
        return await self.call(R.HEALTH, timeout=3)

    # --- experiments ---------------------------------------------------------------------------
    async def experiments(self, **filters: Any) -> list[d.ExperimentRow]:
        return [d.ExperimentRow.of(x) for x in await self.typed(self.api.experiments(self.list_limit, **filters))]

    async def history(self, spec_id: str) -> list[d.HistoryPoint]:
        return d.history_points(await self.typed(self.api.history(spec_id, 200)))

    async def experiment(self, experiment_id: str) -> d.ExperimentDetail:
        return d.ExperimentDetail.of(await self.typed(self.api.experiment(experiment_id)))

    async def experiment_events(self, experiment_id: str) -> AsyncIterator[dict]:
        async for event in self._stream(R.STREAM_EXPERIMENT, experiment_id=experiment_id):
            yield event

    async def metrics(self, experiment_id: str) -> d.MetricsSummary:
        return d.MetricsSummary.of(await self.typed(self.api.metrics(experiment_id)))

    async def compare(self, baseline_id: str, candidate_id: str) -> d.Comparison:
        return d.Comparison.of(await self.typed(self.api.compare(baseline_id, candidate_id)))

    async def cancel_experiment(self, experiment_id: str) -> Any:
        return await self.call(R.CANCEL_EXPERIMENT, experiment_id=experiment_id)

    async def rerun(self, scenario: d.ScenarioRow, spec_id: str | None) -> str:
        """Re-run one replica from its reproducer: same spec version, seed, inputs and matrix entry.
        Returns the new run's id."""
        if scenario.run_id:
            try:
                return (await self.typed(self.api.replay(scenario.run_id))).id
            except ApiError as exc:
                if exc.status != 404:
                    raise  # 404: the run row is gone (errored before it started); fall back below
        repro = scenario.repro
        matrix = scenario.matrix if isinstance(scenario.matrix, dict) and scenario.matrix else None
        body = {
            "spec_id": repro.spec_id, "spec_version": repro.spec_version, "seed": repro.seed,
            "inputs": repro.inputs or None, "matrix_entry": repro.matrix_entry or matrix,
        } if repro is not None else {"spec_id": spec_id, "seed": scenario.seed, "matrix_entry": matrix}
        return (await self.typed(self.api.create_run({k: v for k, v in body.items() if v is not None}))).id

    async def rerun_failed(self, experiment: d.ExperimentRow) -> str:
        """A new experiment re-running what failed, was flaky or errored in `experiment`."""
        created = await self.call(R.CREATE_EXPERIMENT, body={
            "spec_id": experiment.spec_id, "spec_version": experiment.spec_version,
            "filter_failing_from": experiment.id, "name": f"{experiment.name or experiment.id} (failed rerun)",
        } if experiment.spec_version else {
            "spec_id": experiment.spec_id, "filter_failing_from": experiment.id, "name": f"{experiment.name or experiment.id} (failed rerun)",
        })
        await self.call(R.RUN_EXPERIMENT, body={}, experiment_id=created["id"])
        return str(created["id"])

    # --- runs and traces -------------------------------------------------------------------------
    async def run(self, run_id: str) -> d.RunInfo:
        return d.RunInfo.of(await self.typed(self.api.run(run_id)))

    async def effects(self, run_id: str) -> d.RunLedger:
        """The run's effect ledger (409 until the run has finished)."""
        return d.RunLedger.of(await self.typed(self.api.run_effects(run_id)))

    async def effects_diff(self, run_a: str, run_b: str) -> d.RunEffectsDiff:
        return d.RunEffectsDiff.of(await self.typed(self.api.diff_run_effects(run_a, run_b)))

    async def trace_events(self, *, run_id: str | None = None, trace_id: str | None = None, sandbox_id: str | None = None,
                           since: str | None = None, limit: int = 50000) -> list[d.TraceItem]:
        """Stored trace events of a run or a sandbox, oldest first (streamed as NDJSON), or the merged
        spans of one trace."""
        if trace_id and not run_id:
            return list((await self.typed(self.api.trace(trace_id))).spans)
        filters = {"run_id": run_id} if run_id else {"sandbox_id": sandbox_id}
        return await self.typed(self._collect(self.api.trace_events(limit, **filters, since=since)))

    @staticmethod
    async def _collect(items: AsyncIterator[T]) -> list[T]:
        return [item async for item in items]

    async def trajectory(self, url: str) -> dict:
        """A run's full trajectory (audit events, trace events, workspace changes, commands)."""
        path = url.split("://", 1)[1].split("/", 1)[1] if "://" in url else url.lstrip("/")
        answer = await self.typed(self.client.request("GET", "/" + path))  # a signed URL the daemon gave
        return answer if isinstance(answer, dict) else {}

    async def run_stream(self, run_id: str) -> AsyncIterator[d.RunStreamEvent]:
        """The run stream's events (contract RunEvent), read into RunStreamEvent."""
        from daemon.contract.runs import RunEvent

        async for event in self._stream(R.STREAM_RUN, run_id=run_id):
            yield d.RunStreamEvent.of(RunEvent.model_validate(event))

    async def audit(self, sandbox_id: str) -> list[d.AuditRow]:
        """The sandbox's audit log (`/workspace/.svc/audit.jsonl`), parsed."""
        try:
            raw = await self.call(R.READ_SANDBOX_FILE, raw=True, sandbox_id=sandbox_id, path=".svc/audit.jsonl")
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise
        rows = []
        for line in raw.decode("utf-8", "replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                rows.append(d.AuditRow.parse(event, len(rows)))
        return rows

    async def diff(self, sandbox_id: str) -> list[d.DiffEntry]:
        return d.diff_entries(await self.typed(self.api.diff(sandbox_id)))

    # --- sandboxes --------------------------------------------------------------------------------
    async def sandboxes(self, *, stopped: bool = False) -> list[d.SandboxRow]:
        """Live sandboxes; with `stopped`, every sandbox the daemon still lists."""
        filters = {"status": "all"} if stopped else {}
        return [d.SandboxRow.of(x) for x in await self.typed(self.api.sandboxes(self.list_limit, **filters))]

    async def nodes(self) -> NodeList:
        """The nodes sandboxes run on, with what the live sandboxes reserve there."""
        from daemon.contract.sandboxes import NodeList

        return NodeList.model_validate(await self.call(R.LIST_NODES))

    async def delete_sandbox(self, sandbox_id: str) -> None:
        await self.call(R.DELETE_SANDBOX, sandbox_id=sandbox_id)

    async def sandbox_events(self, sandbox_id: str) -> AsyncIterator[SandboxEvent]:
        """The lifecycle stream (contract SandboxEvent): status steps, commands, audit and trace events."""
        from daemon.contract.sandboxes import SandboxEvent

        async for event in self._stream(R.SANDBOX_EVENTS, sandbox_id=sandbox_id):
            yield SandboxEvent.model_validate(event)

    async def _stream(self, route: Any, **path: Any) -> AsyncIterator[dict]:
        try:
            async for event in self.client.stream(route, **path):
                if isinstance(event, dict):
                    yield event
        except (ApiError, DaemonUnreachable):
            raise
        except _TRANSPORT as exc:
            raise DaemonUnreachable(f"stream {route.url(**path)} lost: {exc}") from exc

    # --- specs ------------------------------------------------------------------------------------
    async def upload_spec(self, path: Path, name: str | None = None) -> dict:
        """Upload a spec file with the fixture files it names (read relative to it, client/local_spec.py)."""
        from client.local_spec import upload_body

        return await self.call(R.UPLOAD_SPEC, body=upload_body(path, name))


async def validate_offline(path: Path) -> list[d.SpecIssueRow]:
    """Validate a spec file in-process with the daemon's own loader (`daemon.spec.load_spec`: every
    issue names its line and YAML path), then check that the fixture files an upload would send are
    there. [] means valid."""
    return await asyncio.to_thread(validate_spec_file, path)


def validate_spec_file(path: Path) -> list[d.SpecIssueRow]:
    import yaml

    from client.local_spec import SpecFilesError, collect_files
    from daemon.spec import SpecValidationError, load_spec

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return [d.SpecIssueRow(None, "", f"{path}: no such file")]
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        return [d.SpecIssueRow(None, "", f"{path}: cannot read: {exc}")]
    try:
        load_spec(text, str(path))
    except SpecValidationError as err:
        return [d.SpecIssueRow(issue.line, issue.loc, issue.msg) for issue in err.issues]
    try:
        collect_files(yaml.safe_load(text), Path(path).parent)
    except SpecFilesError as exc:
        return [d.SpecIssueRow(None, "", str(exc))]
    return []


def route_missing(exc: BaseException) -> bool:
    """True when the daemon has no such endpoint at all (an older svcd), not a missing resource."""
    return (
        isinstance(exc, ApiError)
        and exc.status in (404, 405)
        and (exc.status == 405 or (isinstance(exc.details, dict) and exc.details.get("resource") == "route"))
    )
