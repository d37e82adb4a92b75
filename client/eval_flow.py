"""Run a spec file as an experiment, end to end: the library behind `svc eval run`, the MCP
`svc_eval_run` tool, the TUI and watch mode.

    results = await run_spec_file(client, "spec.yaml", replicas=3, on_progress=print)

1. validates the file locally (line-numbered errors before anything is sent);
2. resolves the spec's declared secrets locally with the client's one resolver
   (client/local_spec.py): ``env`` (this process's environment, then ``.env`` / ``.env.local`` in
   the current directory), ``env:OTHER``, ``file:path`` (relative paths from the spec file's
   directory, trailing newline stripped), ``command:cmd`` (stdout, trailing newline stripped).
   ``dashboard`` secrets are resolved by the daemon, which resolves nothing else. A missing secret
   raises :class:`SecretResolutionError` naming it, before anything is uploaded;
3. uploads the agent's ``source:`` directory as a new snapshot version when its content changed
   (client/agent_source.py), then the spec with the fixture files it names (read relative to the spec file; every upload
   is a new version), creates the experiment with the secrets (held in the daemon's memory only),
   runs it;
4. polls ``GET /v1/experiments/{id}`` every ``poll_s`` until it is completed, failed or cancelled,
   calling ``on_progress(results)`` whenever the number of finished runs (or the status) changes;
5. returns RunResults. Past ``wait_timeout_s`` it raises :class:`WaitTimeout` (the experiment keeps
   running). Cancelled (Ctrl-C) while waiting, it cancels the experiment before re-raising.
"""
from __future__ import annotations

import asyncio
import inspect
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

from client.agent_source import AgentSourceError, sync_agent_source
from client.api import ApiError, Client
from client.routes import R
from client.local_spec import (  # noqa: F401  (re-exported: the one resolver lives in client/local_spec.py)
    COMMAND_TIMEOUT_S,
    SecretResolutionError,
    SpecFilesError,
    resolve_secrets,
    upload_spec_file,
)

TERMINAL = ("completed", "failed", "cancelled")
Progress = Callable[[dict[str, Any]], Any | Awaitable[Any]]


class SpecFileError(ValueError):
    """The spec file is missing or invalid (the message lists every issue with its line)."""


class WaitTimeout(TimeoutError):
    def __init__(self, experiment_id: str, waited_s: float, results: dict[str, Any] | None):
        super().__init__(f"experiment {experiment_id} did not finish within {waited_s:g}s; it keeps running"
                         f" (follow it with: svc eval get {experiment_id})")
        self.experiment_id = experiment_id
        self.results = results


def read_spec(path: str | Path, text: str | None = None) -> tuple[str, Any]:
    """The file's text and its validated SpecDocument. `text`: a generated spec's (a Harbor task's),
    which exists nowhere on disk; `path` then only says where its files resolve."""
    from daemon.spec import SpecValidationError, load_spec

    p = Path(path)
    try:
        if text is None:
            text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecFileError(f"{path}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise SpecFileError(f"{path}: cannot read: {exc}") from None
    try:
        return text, load_spec(text, str(path))
    except SpecValidationError as err:
        raise SpecFileError(str(err)) from None


async def _notify(on_progress: Progress | None, results: dict[str, Any]) -> None:
    if on_progress is None:
        return
    outcome = on_progress(results)
    if inspect.isawaitable(outcome):
        await outcome


async def start_spec_file(client: Client, path: str | Path, *, name: str | None = None, replicas: int | None = None,
                          concurrency: int | None = None, filter_failing: str | None = None, seed: str | None = None,
                          matrix: list[dict[str, Any]] | None = None, environ: Mapping[str, str] | None = None,
                          replay_models_from: str | None = None, text: str | None = None) -> dict[str, Any]:
    """Steps 1-3: returns ``{"experiment": created record, "spec": uploaded spec record}``. `text`: a
    generated spec's YAML, never written to `path` (read_spec)."""
    text, doc = read_spec(path, text)
    secrets = resolve_secrets(doc.secrets, Path(path).resolve().parent, environ)
    display = name or Path(path).stem
    try:  # agent.source: upload the agent's directory first when it changed (client/agent_source.py)
        synced = await sync_agent_source(client, path, doc.agent.model_dump(mode="json"))
    except AgentSourceError as exc:
        raise SpecFileError(f"{path}: {exc}") from None
    try:
        record = await upload_spec_file(client, path, Path(path).stem, text)
    except SpecFilesError as exc:
        raise SpecFileError(f"{path}: {exc}") from None
    body: dict[str, Any] = {"name": display, "spec_id": record["id"], "spec_version": record["version"]}
    if secrets:
        body["secrets"] = secrets
    for key, value in (("replicas", replicas), ("concurrency", concurrency), ("filter_failing_from", filter_failing),
                       ("seed", seed), ("matrix", matrix), ("replay_models_from", replay_models_from)):
        if value is not None:
            body[key] = value
    created = await client.call(R.CREATE_EXPERIMENT, body=body)
    await client.call(R.RUN_EXPERIMENT, experiment_id=created["id"])
    return {"experiment": created, "spec": record, "agent": synced}


async def wait_for_experiment(client: Client, experiment_id: str, *, poll_s: float = 2.0, wait_timeout_s: float = 600.0,
                              on_progress: Progress | None = None, cancel_on_interrupt: bool = True) -> dict[str, Any]:
    """Step 4-5: poll until the experiment is finished; returns RunResults."""
    deadline = time.monotonic() + wait_timeout_s
    last_key: tuple | None = None
    results: dict[str, Any] | None = None
    try:
        while True:
            results = await client.call(R.GET_EXPERIMENT, experiment_id=experiment_id)
            key = (results.get("status"), results.get("completed_runs"))
            if key != last_key:
                last_key = key
                await _notify(on_progress, results)
            if results.get("status") in TERMINAL:
                return results
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(experiment_id, wait_timeout_s, results)
            await asyncio.sleep(min(poll_s, remaining))
    except asyncio.CancelledError:
        if cancel_on_interrupt:
            try:
                await asyncio.wait_for(client.call(R.CANCEL_EXPERIMENT, experiment_id=experiment_id), 5)
            except (ApiError, Exception):
                pass
        raise


async def run_spec_file(client: Client, path: str | Path, *, name: str | None = None, replicas: int | None = None,
                        concurrency: int | None = None, on_progress: Progress | None = None, filter_failing: str | None = None,
                        seed: str | None = None, poll_s: float = 2.0, wait_timeout_s: float = 600.0,
                        environ: Mapping[str, str] | None = None, replay_models_from: str | None = None,
                        text: str | None = None) -> dict[str, Any]:
    """Upload, resolve secrets, create, run and wait (see the module docstring); returns RunResults.
    `text`: a generated spec's YAML (a Harbor task's), `path` only where its files resolve."""
    started = await start_spec_file(client, path, name=name, replicas=replicas, concurrency=concurrency,
                                    filter_failing=filter_failing, seed=seed, environ=environ,
                                    replay_models_from=replay_models_from, text=text)
    return await wait_for_experiment(client, started["experiment"]["id"], poll_s=poll_s, wait_timeout_s=wait_timeout_s,
                                     on_progress=on_progress)


async def extend_undecided(client: Client, path: str | Path, results: dict[str, Any], runs: int, *, poll_s: float = 2.0,
                           wait_timeout_s: float = 600.0, on_progress: Progress | None = None,
                           environ: Mapping[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """`--adaptive N`: up to `runs` more replicas for the scenarios whose verdict is undecided
    (``POST /v1/experiments/{id}/extend``, the spec's secrets resolved again), then wait; returns
    (RunResults, what was spent)."""
    _, doc = read_spec(path)
    body: dict[str, Any] = {"runs": runs}
    secrets = resolve_secrets(doc.secrets, Path(path).resolve().parent, environ)
    if secrets:
        body["secrets"] = secrets
    extended = await client.call(R.EXTEND_EXPERIMENT, body=body, experiment_id=results["id"])
    if extended["added_runs"]:
        results = await wait_for_experiment(client, results["id"], poll_s=poll_s, wait_timeout_s=wait_timeout_s,
                                            on_progress=on_progress)
    return results, extended


def not_passed(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Scenarios that did not pass: the strategy said no (``passed`` false) or there is no verdict."""
    return [s for s in results.get("scenarios") or [] if not s.get("passed")]


def exit_code(results: dict[str, Any]) -> int:
    """0 when the experiment completed and every scenario passed (under the spec's replica
    aggregation strategy); 1 otherwise."""
    if results.get("status") != "completed":
        return 1
    return 1 if not_passed(results) else 0
