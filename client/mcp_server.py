"""`svc mcp serve`: a stdio Model Context Protocol server mirroring the `svc eval` and `svc logs`
commands, so editor agents can run evals and read traces. Each tool's inputs are its command's flags
(same names, same defaults, same bounds). Stdout carries JSON-RPC only."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from pydantic import Field

from client.api import ApiError, Client, DaemonUnreachable
from client.routes import R

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


def build_server(client: Client) -> FastMCP:
    server = FastMCP("svc", instructions="Run agent evaluations in svc sandboxes and read their results and traces.")

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
    ) -> dict[str, Any]:
        """`svc eval run`: upload a spec file, run it as an experiment, wait for it, and return RunResults
        (scenarios with verdicts, scores, reproducers; metrics)."""
        from client.eval_flow import WaitTimeout, run_spec_file

        poll_s, wait_s = _duration(poll, "poll"), _duration(wait_timeout, "wait_timeout")
        try:
            return await run_spec_file(client, spec_path, name=name, replicas=replicas, concurrency=concurrency,
                                       filter_failing=filter_failing, seed=seed, poll_s=poll_s, wait_timeout_s=wait_s)
        except WaitTimeout as exc:
            raise ToolError(str(exc)) from exc
        except ApiError as exc:
            raise _api_error(exc) from exc
        except DaemonUnreachable as exc:
            raise ToolError(str(exc)) from exc
        except (ValueError, OSError) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def svc_eval_list(spec: str | None = None, status: ExperimentStatus | None = None, limit: Limit = 100) -> dict[str, Any]:
        """`svc eval list`: experiments, newest first (filters: spec id, status)."""
        return await collect(R.LIST_EXPERIMENTS, {"spec_id": spec, "status": status}, 100, limit)

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
        baseline: Annotated[str | None, Field(description="path of a bundle from `svc eval export --bundle`, compared "
                                                    "without importing it")] = None,
        allow_spec_change: Annotated[bool, Field(description="compare with a bundle whose spec digest differs")] = False,
        gate: Annotated[bool, Field(description="add gate_passed: false when the candidate regressed")] = False,
        threshold: Annotated[dict[str, float] | None, Field(description="override thresholds, e.g. {\"pass_rate\": 0.05}")] = None,
        gate_thresholds: Annotated[bool, Field(description="a crossed threshold is a regression too")] = False,
        level: Annotated[float, Field(gt=0, lt=1, description="significance level of the paired test")] = 0.05,
    ) -> dict[str, Any]:
        """`svc eval compare A B`: `regressed` is true on a significant regression (paired test over the
        scenarios), or with gate_thresholds on a crossed threshold; each metric says its decision and p-value."""
        body: dict[str, Any] = {"candidate_id": candidate_id, "gate_thresholds": gate_thresholds, "level": level,
                                "allow_spec_change": allow_spec_change}
        if baseline:
            from client.commands.eval import read_bundle

            body["baseline_bundle"] = read_bundle(baseline)
        else:
            body["baseline_id"] = baseline_id
        if threshold:
            body["thresholds"] = threshold
        result = await call(R.COMPARE_EXPERIMENTS, body=body)
        if gate:
            result["gate_passed"] = not result.get("regressed")
        return result

    @server.tool()
    async def svc_logs_traces(
        experiment_id: str | None = None,
        event_type: EventType | None = None,
        tool: str | None = None,
        agent: str | None = None,
        sandbox: str | None = None,
        run: str | None = None,
        since: Annotated[str | None, Field(description="RFC 3339 date-time")] = None,
        page_size: PageSize = 100,
        limit: Limit = 1000,
    ) -> dict[str, Any]:
        """`svc logs traces`: trace events (LLM calls, tool uses, tool calls), filtered."""
        params = {"experiment_id": experiment_id, "event_type": event_type, "tool": tool, "agent": agent,
                  "sandbox_id": sandbox, "run_id": run, "since": since}
        return await collect(R.LIST_TRACES, params, page_size, limit)

    @server.tool()
    async def svc_logs_trace(trace_id: str) -> dict[str, Any]:
        """`svc logs trace`: every span of one trace, ordered as a tree."""
        return await call(R.GET_TRACE, trace_id=trace_id)

    @server.tool()
    async def svc_logs_spans(
        experiment: str | None = None,
        trace: str | None = None,
        span: str | None = None,
        parent_span: str | None = None,
        root_span: str | None = None,
        tool: str | None = None,
        event_type: EventType | None = None,
        page_size: PageSize = 100,
        limit: Limit = 1000,
    ) -> dict[str, Any]:
        """`svc logs spans`: spans matching the filters."""
        params = {
            "experiment_id": experiment, "trace_id": trace, "span_id": span, "parent_span_id": parent_span,
            "root_span_id": root_span, "tool": tool, "event_type": event_type,
        }
        return await collect(R.LIST_SPANS, params, page_size, limit)

    @server.tool()
    async def svc_logs_scenarios(experiment: str, status: ScenarioStatus | None = None, scenario: str | None = None,
                                 page_size: PageSize = 100, limit: Limit = 10_000) -> dict[str, Any]:
        """`svc logs scenarios`: scenarios of an experiment (filter by status or id), with verdicts and reproducers."""
        return await collect(R.LIST_SCENARIOS, {"experiment_id": experiment, "status": status, "scenario_id": scenario}, page_size, limit)

    @server.tool()
    async def svc_logs_scores(experiment: str, rule: str | None = None, page_size: PageSize = 100,
                              limit: Limit = 10_000) -> dict[str, Any]:
        """`svc logs scores`: per-span scores of an experiment (filter by score rule id)."""
        return await collect(R.LIST_SCORES, {"experiment_id": experiment, "rule_id": rule}, page_size, limit)

    return server


async def serve_stdio(client: Client) -> None:
    await build_server(client).run_stdio_async()
