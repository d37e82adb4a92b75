"""`svc mcp serve`: a stdio Model Context Protocol server mirroring the `svc eval` and `svc logs`
commands, so editor agents can run evals and read traces. Stdout carries JSON-RPC only."""
from __future__ import annotations

from typing import Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.exceptions import ToolError

from client.api import ApiError, Client, DaemonUnreachable

EventType = Literal["llm_call", "tool_use", "tool_call"]
ScenarioStatus = Literal["passed", "failed", "error"]


def build_server(client: Client) -> FastMCP:
    server = FastMCP("svc", instructions="Run agent evaluations in svc sandboxes and read their results and traces.")

    async def call(method: str, path: str, **kw: Any) -> Any:
        try:
            return await client.request(method, path, **kw)
        except ApiError as exc:
            raise ToolError(f"{exc.status} {exc.code}: {exc.body.get('message', '')}") from exc
        except DaemonUnreachable as exc:
            raise ToolError(str(exc)) from exc

    async def collect(path: str, params: dict[str, Any], page_size: int, limit: int) -> dict[str, Any]:
        items: list[Any] = []
        cursor = None
        while len(items) < limit:
            page = await call("GET", path, params={**params, "limit": min(page_size, limit - len(items)), "cursor": cursor})
            items += page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return {"items": items, "count": len(items), "truncated": bool(cursor)}

    @server.tool()
    async def svc_eval_run(
        spec_path: str, name: str | None = None, replicas: int | None = None, concurrency: int | None = None
    ) -> dict[str, Any]:
        """Upload a spec file, run it as an experiment, wait for it, and return RunResults
        (scenarios with verdicts, scores, reproducers; metrics)."""
        from client.eval_flow import run_spec_file

        try:
            return await run_spec_file(client, spec_path, name=name, replicas=replicas, concurrency=concurrency)
        except ApiError as exc:
            raise ToolError(f"{exc.status} {exc.code}: {exc.body.get('message', '')}") from exc
        except (ValueError, OSError) as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def svc_eval_list(spec_id: str | None = None, status: str | None = None, limit: int = 100) -> dict[str, Any]:
        """List experiments, newest first (filters: spec_id, status)."""
        return await collect("/v1/experiments", {"spec_id": spec_id, "status": status}, 100, limit)

    @server.tool()
    async def svc_eval_get(experiment_id: str) -> dict[str, Any]:
        """One experiment's RunResults."""
        return await call("GET", f"/v1/experiments/{experiment_id}")

    @server.tool()
    async def svc_eval_metrics(experiment_id: str) -> dict[str, Any]:
        """Aggregate metrics of an experiment: pass rate, cost, wall time, tool stats."""
        return await call("GET", f"/v1/metrics/experiments/{experiment_id}")

    @server.tool()
    async def svc_eval_compare(baseline_id: str, candidate_id: str) -> dict[str, Any]:
        """Compare two experiments; `regressed` is true when the candidate is worse past a threshold."""
        return await call("POST", "/v1/experiments/compare", json_body={"baseline_id": baseline_id, "candidate_id": candidate_id})

    @server.tool()
    async def svc_logs_traces(
        experiment_id: str | None = None,
        event_type: EventType | None = None,
        tool: str | None = None,
        agent: str | None = None,
        sandbox: str | None = None,
        since: str | None = None,
        page_size: int = 100,
        limit: int = 1000,
    ) -> dict[str, Any]:
        """Trace events (LLM calls, tool uses, tool calls), newest first, filtered."""
        params = {"experiment_id": experiment_id, "event_type": event_type, "tool": tool, "agent": agent, "sandbox_id": sandbox, "since": since}
        return await collect("/v1/traces", params, page_size, limit)

    @server.tool()
    async def svc_logs_trace(trace_id: str) -> dict[str, Any]:
        """Every span of one trace, ordered as a tree."""
        return await call("GET", f"/v1/traces/{trace_id}")

    @server.tool()
    async def svc_logs_spans(
        experiment: str | None = None,
        trace: str | None = None,
        span: str | None = None,
        parent_span: str | None = None,
        root_span: str | None = None,
        tool: str | None = None,
        event_type: EventType | None = None,
        page_size: int = 100,
        limit: int = 1000,
    ) -> dict[str, Any]:
        """Spans matching the filters."""
        params = {
            "experiment_id": experiment, "trace_id": trace, "span_id": span, "parent_span_id": parent_span,
            "root_span_id": root_span, "tool": tool, "event_type": event_type,
        }
        return await collect("/v1/spans", params, page_size, limit)

    @server.tool()
    async def svc_logs_scenarios(experiment: str, status: ScenarioStatus | None = None, scenario: str | None = None) -> dict[str, Any]:
        """Scenarios of an experiment (filter by status or id), with verdicts and reproducers."""
        return await collect("/v1/scenarios", {"experiment_id": experiment, "status": status, "scenario_id": scenario}, 100, 10_000)

    @server.tool()
    async def svc_logs_scores(experiment: str, rule: str | None = None) -> dict[str, Any]:
        """Per-trace scores of an experiment (filter by score rule)."""
        return await collect("/v1/scores", {"experiment_id": experiment, "rule_id": rule}, 100, 10_000)

    return server


async def serve_stdio(client: Client) -> None:
    await build_server(client).run_stdio_async()
