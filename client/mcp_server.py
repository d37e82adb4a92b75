"""`svc mcp serve`: a stdio Model Context Protocol server mirroring the `svc eval` and `svc logs`
commands (and `svc spec validate`, `svc agents upload`, `svc runs get|replay`), so editor agents can
validate a spec, upload their agent, run evals, replay a run and read traces. Each tool's inputs are its command's flags
(same defaults, same bounds); an argument naming a resource by id is `<resource>_id` in every tool
(`experiment_id`, `trace_id`, `run_id`, ...), whatever the flag is called. A tool refuses an argument
it does not take, naming it. The server reports svc's version. Stdout carries JSON-RPC only."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import Field

from client.api import ApiError, Client, DaemonUnreachable
from client.routes import R
from daemon import __version__

EventType = Literal["llm_call", "tool_use", "tool_call", "span"]
ScenarioStatus = Literal["passed", "failed", "flaky", "error", "not_passed", "queued", "running", "cancelled"]
ExperimentStatus = Literal["created", "running", "completed", "failed", "cancelled"]
PageSize = Annotated[int, Field(ge=1, le=1000, description="items per request (1-1000)")]
Limit = Annotated[int, Field(ge=1, le=10_000, description="at most this many items in the answer (1-10000)")]
Positive = Annotated[int, Field(ge=1, le=1000)]
Duration = Annotated[str, Field(max_length=32, description="a duration such as 500ms, 2s, 10m")]
MAX_WAIT_S = 24 * 3600


def _duration(value: str, field: str) -> float:
    from daemon.spec import parse_duration

    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        raise ToolError(f"{field}: {exc}") from None
    if not 0 < seconds <= MAX_WAIT_S:
        raise ToolError(f"{field}: must be more than 0 and at most 24h, got {value!r}")
    return seconds


def _api_error(exc: ApiError) -> ToolError:
    return ToolError(f"{exc.status} {exc.code}: {exc.body.get('message', '')}")


class _StrictServer(FastMCP):
    """Refuses a call with an argument its tool does not take (the MCP library would drop it
    silently, and a misspelt filter would then answer everything)."""

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        tool = self._tool_manager.get_tool(name)
        if tool is not None:
            known = set(tool.parameters.get("properties", {}))
            unknown = sorted(set(arguments or {}) - known)
            if unknown:
                raise ToolError(f"{name}: unknown argument {unknown[0]!r}; it takes {', '.join(sorted(known))}")
        return await super().call_tool(name, arguments)


def build_server(client: Client) -> FastMCP:
    server = _StrictServer("svc", instructions="Run agent evaluations in svc sandboxes and read their results and traces.")
    server._mcp_server.version = __version__  # else the MCP library reports its own version as ours

    async def call(route: Any, **kw: Any) -> Any:
        try:
            return await client.call(route, **kw)
        except ApiError as exc:
            raise _api_error(exc) from exc
        except DaemonUnreachable as exc:
            raise ToolError(str(exc)) from exc

    async def collect(route: Any, params: dict[str, Any], page_size: int, limit: int) -> dict[str, Any]:
        items: list[Any] = []
        cursor = None
        while len(items) < limit:
            page = await call(route, query={**params, "limit": min(page_size, limit - len(items)), "cursor": cursor})
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return {"items": items, "count": len(items), "truncated": bool(cursor)}

    @server.tool()
    async def svc_eval_run(
        spec_path: Annotated[str, Field(description="path of the spec YAML file (the command's SPEC.yaml)")],
        name: str | None = None,
        replicas: Positive | None = None,
        concurrency: Positive | None = None,
        filter_failing: Annotated[str | None, Field(description="re-run only the scenarios that did not pass in this experiment")] = None,
        seed: Annotated[str | None, Field(max_length=200, description="base seed: the same seed reproduces every replica")] = None,
        poll: Duration = "2s",
        wait_timeout: Duration = "10m",
        adaptive: Annotated[Positive | None, Field(description="then up to N more runs for the scenarios whose verdict is still "
                                                   "undecided (flaky); `adaptive` in the answer says what was spent")] = None,
        replay_models: Annotated[str | None, Field(description="answer every model call from this experiment's recordings "
                                                   "(same scenario and replica; no provider is called)")] = None,
        check_spec: Annotated[bool, Field(description="first check the spec's checks with `oracle` (svc spec check); "
                                          "when one is flaky or vacuous, answer the report and run nothing")] = False,
        oracle: Annotated[str | None, Field(description="with check_spec: the agent snapshot that solves the task")] = None,
        check_runs: Positive = 5,
        keep_agent_processes: Annotated[bool, Field(description="with a Harbor task directory as spec_path (run with its "
                                                    "solution/solve.sh): keep what the agent started running while "
                                                    "test.sh runs, as Harbor does")] = False,
    ) -> dict[str, Any]:
        """`svc eval run`: upload a spec file (or a Harbor task directory, run with its solution), run it as an
        experiment, wait for it, and return RunResults (scenarios with verdicts, scores, reproducers; metrics)."""
        from client.eval_flow import WaitTimeout, extend_undecided, run_spec_file

        poll_s, wait_s = _duration(poll, "poll"), _duration(wait_timeout, "wait_timeout")
        try:
            if check_spec:
                from client.commands.spec_check import check_spec as run_check

                if not oracle:
                    raise ToolError("check_spec needs oracle: the agent snapshot that solves the task")
                report = await run_check(client, spec_path, oracle, check_runs, wait_s=wait_s)
                if not report["ok"]:
                    return {"spec_check": report, "ran": False}
            import contextlib

            from daemon.tasks import harbor

            with contextlib.ExitStack() as stack:
                if harbor.is_task_dir(spec_path):  # its generated spec, in a private directory (harbor.staged):
                    task = harbor.load(spec_path)  # nothing is written into the task nor read from it again
                    text = harbor.spec_yaml(task, oracle=True, keep_agent_processes=keep_agent_processes)
                    spec_path, name = str(stack.enter_context(harbor.staged(task, text))), name or task.name
                results = await run_spec_file(client, spec_path, name=name, replicas=replicas, concurrency=concurrency,
                                              filter_failing=filter_failing, seed=seed, poll_s=poll_s, wait_timeout_s=wait_s,
                                              replay_models_from=replay_models)
                if adaptive and results.get("status") == "completed":
                    results, spent = await extend_undecided(client, spec_path, results, adaptive, poll_s=poll_s,
                                                            wait_timeout_s=wait_s)
                    results["adaptive"] = spent
                return results
        except WaitTimeout as exc:
            raise ToolError(str(exc)) from exc
        except ApiError as exc:
            raise _api_error(exc) from exc
        except DaemonUnreachable as exc:
            raise ToolError(str(exc)) from exc
        except (ValueError, OSError) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def svc_eval_list(spec_id: str | None = None, status: ExperimentStatus | None = None, limit: Limit = 100) -> dict[str, Any]:
        """`svc eval list`: experiments, newest first (filters: spec id, status)."""
        return await collect(R.LIST_EXPERIMENTS, {"spec_id": spec_id, "status": status}, 100, limit)

    @server.tool()
    async def svc_eval_get(experiment_id: str) -> dict[str, Any]:
        """`svc eval get`: one experiment's RunResults."""
        return await call(R.GET_EXPERIMENT, experiment_id=experiment_id)

    @server.tool()
    async def svc_eval_metrics(experiment_id: str) -> dict[str, Any]:
        """`svc eval metrics`: aggregate metrics of an experiment: pass rate, cost, wall time, tool stats."""
        return await call(R.GET_EXPERIMENT_METRICS, experiment_id=experiment_id)

    @server.tool()
    async def svc_eval_compare(
        candidate_id: str,
        baseline_id: Annotated[str | None, Field(description="the baseline experiment (or baseline)")] = None,
        baseline_bundle: Annotated[str | None, Field(description="path of a bundle from `svc eval export --bundle`, compared "
                                                           "without importing it (the command's --baseline)")] = None,
        allow_spec_change: Annotated[bool, Field(description="compare with a bundle whose spec digest differs")] = False,
        gate: Annotated[bool, Field(description="add gate_passed and gate_exit_code (the command's exit code under --gate: "
                                                "0 no_change/improved, 1 regressed, 2 inconclusive)")] = False,
        allow_inconclusive: Annotated[bool, Field(description="with gate: an inconclusive answer passes (exit code 0, not 2)")] = False,
        threshold: Annotated[dict[str, float] | None, Field(description="override thresholds, e.g. {\"pass_rate\": 0.05}")] = None,
        gate_thresholds: Annotated[bool, Field(description="a crossed threshold is a regression too")] = False,
        level: Annotated[float, Field(gt=0, lt=1, description="significance level of the paired test")] = 0.05,
        adaptive: Annotated[int | None, Field(ge=1, le=1000, description="while inconclusive, add up to this many runs to the "
                                                                     "gated scenarios of both experiments (the candidate's only "
                                                                     "with a bundle) and compare again, each look at the level "
                                                                     "split over the looks (the command's --adaptive N)")] = None,
        max_cost: Annotated[float | None, Field(gt=0, description="with adaptive: stop before the added runs' recorded cost "
                                                                  "would pass this many USD (--max-cost)")] = None,
        poll: Duration = "2s",
        wait_timeout: Duration = "10m",
    ) -> dict[str, Any]:
        """`svc eval compare A B`: `decision` is the gate's word (regressed, improved, no_change, inconclusive) with its
        one-line `reason`; `regressed` is true on a significant regression, or with gate_thresholds on a crossed
        threshold; each metric says its decision, p-value and which test decided. With `adaptive` the answer has an
        `adaptive` block: runs added per side, dollars spent, looks and why it stopped."""
        body: dict[str, Any] = {"candidate_id": candidate_id, "gate_thresholds": gate_thresholds, "level": level,
                                "allow_spec_change": allow_spec_change}
        if baseline_bundle:
            from client.commands.eval import read_bundle

            body["baseline_bundle"] = read_bundle(baseline_bundle)
        else:
            body["baseline_id"] = baseline_id
        if threshold:
            body["thresholds"] = threshold
        if max_cost is not None and not adaptive:
            raise ToolError("max_cost bounds the runs adaptive adds: give adaptive too")
        if adaptive:
            from client.gate_adaptive import adaptive_compare

            try:
                result = await adaptive_compare(client, body, runs=adaptive, max_cost=max_cost, level=level,
                                                poll_s=_duration(poll, "poll"),
                                                wait_timeout_s=_duration(wait_timeout, "wait_timeout"))
            except ApiError as exc:
                raise _api_error(exc) from exc
            except DaemonUnreachable as exc:
                raise ToolError(str(exc)) from exc
        else:
            result = await call(R.COMPARE_EXPERIMENTS, body=body)
        if gate:
            from client.commands.eval import gate_exit_code

            result["gate_exit_code"] = gate_exit_code(result.get("decision") or "", True, allow_inconclusive)
            result["gate_passed"] = result["gate_exit_code"] == 0
        return result

    @server.tool()
    async def svc_logs_traces(
        experiment_id: str | None = None,
        event_type: EventType | None = None,
        tool: str | None = None,
        agent: str | None = None,
        sandbox_id: str | None = None,
        run_id: str | None = None,
        since: Annotated[str | None, Field(description="RFC 3339 date-time")] = None,
        page_size: PageSize = 100,
        limit: Limit = 1000,
    ) -> dict[str, Any]:
        """`svc logs traces`: trace events (LLM calls, tool uses, tool calls), filtered."""
        params = {"experiment_id": experiment_id, "event_type": event_type, "tool": tool, "agent": agent,
                  "sandbox_id": sandbox_id, "run_id": run_id, "since": since}
        return await collect(R.LIST_TRACES, params, page_size, limit)

    @server.tool()
    async def svc_logs_trace(trace_id: str) -> dict[str, Any]:
        """`svc logs trace`: every span of one trace, ordered as a tree."""
        return await call(R.GET_TRACE, trace_id=trace_id)

    @server.tool()
    async def svc_logs_spans(
        experiment_id: str | None = None,
        trace_id: str | None = None,
        span_id: str | None = None,
        parent_span_id: str | None = None,
        root_span_id: str | None = None,
        tool: str | None = None,
        event_type: EventType | None = None,
        page_size: PageSize = 100,
        limit: Limit = 1000,
    ) -> dict[str, Any]:
        """`svc logs spans`: spans matching the filters."""
        params = {
            "experiment_id": experiment_id, "trace_id": trace_id, "span_id": span_id, "parent_span_id": parent_span_id,
            "root_span_id": root_span_id, "tool": tool, "event_type": event_type,
        }
        return await collect(R.LIST_SPANS, params, page_size, limit)

    @server.tool()
    async def svc_logs_scenarios(experiment_id: str, status: ScenarioStatus | None = None, scenario_id: str | None = None,
                                 page_size: PageSize = 100, limit: Limit = 10_000) -> dict[str, Any]:
        """`svc logs scenarios`: scenarios of an experiment (filter by status or id), with verdicts and reproducers."""
        query = {"experiment_id": experiment_id, "status": status, "scenario_id": scenario_id}
        return await collect(R.LIST_SCENARIOS, query, page_size, limit)

    @server.tool()
    async def svc_logs_scores(experiment_id: str, rule_id: str | None = None, page_size: PageSize = 100,
                              limit: Limit = 10_000) -> dict[str, Any]:
        """`svc logs scores`: per-span scores of an experiment (filter by score rule id)."""
        return await collect(R.LIST_SCORES, {"experiment_id": experiment_id, "rule_id": rule_id}, page_size, limit)

    @server.tool()
    async def svc_spec_validate(
        spec_path: Annotated[str, Field(description="path of the spec YAML file (the command's FILE)")],
    ) -> dict[str, Any]:
        """`svc spec validate --json`, offline: `ok`, and when not, `errors` ({loc, line, column, msg}: the YAML path, line
        and column of each problem, all at once: schema errors, missing fixture files, `{{ name }}` placeholders in the
        prompt that task.inputs and the matrix leave unfilled); the spec's id and how many invariants and runs it has."""
        from pathlib import Path

        from client.commands.specs import validate_file

        try:
            text = Path(spec_path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolError(f"{spec_path}: cannot read: {exc}") from exc
        result = validate_file(spec_path, text)
        return {"spec_path": result.pop("file"), **result}

    @server.tool()
    async def svc_agents_upload(
        name: Annotated[str, Field(description="the agent's name (a spec's agent.snapshot)")],
        bundle: Annotated[str, Field(description="path of the agent's directory, or of a .tar.gz rooted at it")],
        entrypoint: Annotated[str, Field(description='the command, e.g. "python agent.py" (relative paths are inside the bundle)')],
        tag: Annotated[str | None, Field(description="a label to move to this version (latest is always set)")] = None,
        runtime: Annotated[str | None, Field(description="a runtime hint, e.g. python3.11")] = None,
        auth: Annotated[dict[str, Any] | None, Field(description="{required_env, config_files, egress}")] = None,
    ) -> dict[str, Any]:
        """`svc agents upload`: upload an agent snapshot (a new version of `name`); the snapshot's id, version and size."""
        import json
        import shlex
        from pathlib import Path

        import aiohttp

        from client.commands.agents import pack_directory

        metadata: dict[str, Any] = {"name": name, "entrypoint": shlex.split(entrypoint)}
        metadata.update({k: v for k, v in {"tag": tag, "runtime": runtime, "auth": auth}.items() if v})
        target = Path(bundle)
        try:
            data = pack_directory(target) if target.is_dir() else target.read_bytes()
        except OSError as exc:
            raise ToolError(f"{bundle}: cannot read the bundle: {exc}") from exc
        form = aiohttp.FormData()
        form.add_field("metadata", json.dumps(metadata), content_type="application/json")
        form.add_field("bundle", data, filename="bundle.tar.gz", content_type="application/gzip")
        return await call(R.UPLOAD_AGENT, data=form, timeout=max(client.config.timeout, 300))

    @server.tool()
    async def svc_runs_get(run_id: str) -> dict[str, Any]:
        """`svc runs get`: one run: status, verdict, score, invariant results, error, reproducer."""
        return await call(R.GET_RUN, run_id=run_id)

    @server.tool()
    async def svc_runs_replay(
        run_id: str,
        models: Annotated[Literal["recorded", "live"], Field(description="recorded (default): the model gateway answers "
                                                           "from the run's recording, no provider key needed; live: ask the providers")] = "recorded",
        secret: Annotated[dict[str, str] | None, Field(description="secret values by name (the command's --secret NAME=VALUE)")] = None,
        no_local_secrets: Annotated[bool, Field(description="send only `secret`, resolve nothing on this machine")] = False,
        wait: Annotated[bool, Field(description="wait for the replay to end and answer the final run")] = False,
        poll: Duration = "2s",
        wait_timeout: Duration = "10m",
    ) -> dict[str, Any]:
        """`svc runs replay`: run again with the same spec version, seed, inputs and matrix entry (and pinned agent
        snapshot); answers the new run (`replay_of` names the original), or with `wait` the run once it ended."""
        import asyncio
        import time

        from client.commands.runs import gateway_only_secrets
        from client.local_spec import SecretResolutionError, stored_spec_secrets

        poll_s, wait_s = _duration(poll, "poll"), _duration(wait_timeout, "wait_timeout")
        secrets = dict(secret or {})
        if not no_local_secrets:
            original = await call(R.GET_RUN, run_id=run_id)
            skip = set(secrets)
            try:
                if models == "recorded" and (original.get("models") or {}).get("recording"):
                    skip |= await gateway_only_secrets(client, original["spec_id"], original["spec_version"])
                resolved = await stored_spec_secrets(client, original["spec_id"], original["spec_version"], skip=frozenset(skip))
            except SecretResolutionError as exc:
                raise ToolError(f"{exc} (pass it in `secret`)") from exc
            except ApiError as exc:
                raise _api_error(exc) from exc
            secrets = {**resolved, **secrets}
        run = await call(R.REPLAY_RUN, body={"secrets": secrets} if secrets else None, run_id=run_id, query={"models": models})
        deadline = time.monotonic() + wait_s
        while wait and run.get("status") in ("queued", "running"):
            if time.monotonic() > deadline:
                raise ToolError(f"run {run['id']} is still {run['status']} after {wait_timeout}; svc_runs_get it later")
            await asyncio.sleep(poll_s)
            run = await call(R.GET_RUN, run_id=run["id"])
        return run

    for tool in server._tool_manager.list_tools():  # clients see that nothing else is taken
        tool.parameters["additionalProperties"] = False
    return server


async def serve_stdio(client: Client) -> None:
    await build_server(client).run_stdio_async()
