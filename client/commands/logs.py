"""`svc logs traces|trace|spans|scenarios|scores|export`: read an experiment's evidence, streamed page
by page (`svc eval scenarios` and `svc eval export` are the older spellings of the last two).

`--format ndjson` (default for lists) writes one JSON object per line as each page arrives;
`--format json` writes one JSON array, also streamed. `-o FILE` writes there instead of stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from typing import Any, AsyncIterator, Iterator, TextIO

from client.api import Client
from client.routes import R

EVENT_TYPES = ("llm_call", "tool_use", "tool_call", "span")


def register(sub: argparse._SubParsersAction) -> None:
    logs = sub.add_parser("logs", help="trace events and spans")
    actions = logs.add_subparsers(dest="action", metavar="ACTION", required=True)

    traces = actions.add_parser("traces", help="stream trace events (of an experiment, or all) as NDJSON")
    traces.add_argument("experiment_id", nargs="?", help="only this experiment's events (default: every event)")
    traces.add_argument("--event-type", choices=EVENT_TYPES)
    traces.add_argument("--tool", help="tool or model-call name")
    traces.add_argument("--agent", help="agent name")
    traces.add_argument("--sandbox", help="sandbox id")
    traces.add_argument("--run", help="run id")
    traces.add_argument("--since", help="RFC 3339 date-time, e.g. 2025-01-31T12:00:00Z")
    _output_flags(traces)
    traces.set_defaults(func=logs_traces)

    trace = actions.add_parser("trace", help=f"one trace: its spans as a tree ({R.GET_TRACE})")
    trace.add_argument("trace_id")
    trace.add_argument("-o", "--output", help="write to this file instead of stdout")
    trace.set_defaults(func=logs_trace)

    spans = actions.add_parser("spans", help="stream spans (each span's events merged)")
    spans.add_argument("--experiment", help="experiment id")
    spans.add_argument("--trace", help="trace id")
    spans.add_argument("--span", help="span id")
    spans.add_argument("--parent-span", help="parent span id")
    spans.add_argument("--root-span", help="root span id")
    spans.add_argument("--tool", help="tool or model-call name")
    spans.add_argument("--event-type", choices=EVENT_TYPES)
    _output_flags(spans)
    spans.set_defaults(func=logs_spans)

    from client.commands.eval import STATUS_FILTERS

    scenarios = actions.add_parser("scenarios", help=f"scenarios of an experiment with verdicts and reproducers ({R.LIST_SCENARIOS})")
    scenarios.add_argument("--experiment", required=True, help="experiment id")
    scenarios.add_argument("--status", choices=STATUS_FILTERS, help="passed, failed, error (or flaky, not_passed, ...)")
    scenarios.add_argument("--scenario", help="scenario id")
    _output_flags(scenarios)
    scenarios.set_defaults(func=logs_scenarios)

    if "scores" not in actions.choices:  # the score-rules module may register its own
        scores = actions.add_parser("scores", help=f"per-span scores of an experiment ({R.LIST_SCORES})")
        scores.add_argument("--experiment", required=True, help="experiment id")
        scores.add_argument("--rule", help="score rule id")
        _output_flags(scores)
        scores.set_defaults(func=logs_scores)

    export = actions.add_parser("export", help="the full bundle of an experiment (spec, scenarios, runs, traces, scores)")
    export.add_argument("experiment_id")
    export.add_argument("--format", choices=("json", "ndjson"), default="json")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    export.set_defaults(func=logs_export, bundle=False, traces=False)  # eval export's full bundle, not its baseline bundle


def _output_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", help="write to this file instead of stdout")
    parser.add_argument("--format", choices=("ndjson", "json"), default="ndjson", help="ndjson (default) or one JSON array")
    parser.add_argument("--page-size", type=_page_size, default=100, help="items per request (1-1000, default 100)")


def _page_size(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError("must be between 1 and 1000")
    return value


@contextmanager
def _open_output(path: str | None) -> Iterator[TextIO]:
    if not path:
        yield sys.stdout
        return
    from client.console import CliError

    try:
        handle = open(path, "w", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror}")
    with handle:
        yield handle


async def _write_stream(items: AsyncIterator[Any], fmt: str, path: str | None) -> int:
    count = 0
    with _open_output(path) as out:
        if fmt == "json":
            out.write("[")
        async for item in items:
            if fmt == "json":
                out.write(("," if count else "") + "\n  " + json.dumps(item, separators=(",", ":")))
            else:
                out.write(json.dumps(item, separators=(",", ":")) + "\n")
            count += 1
            if count % 100 == 0:
                out.flush()
        if fmt == "json":
            out.write("\n]\n" if count else "]\n")
        out.flush()
    if path:
        print(f"wrote {count} items to {path}", file=sys.stderr)
    return count


async def logs_traces(args, client: Client) -> int:
    params = {
        "experiment_id": args.experiment_id, "event_type": args.event_type, "tool": args.tool, "agent": args.agent,
        "sandbox_id": args.sandbox, "run_id": args.run, "since": args.since,
    }
    await _write_stream(client.pages(R.LIST_TRACES, query=params, page_size=args.page_size), args.format, args.output)
    return 0


async def logs_spans(args, client: Client) -> int:
    params = {
        "experiment_id": args.experiment, "trace_id": args.trace, "span_id": args.span, "parent_span_id": args.parent_span,
        "root_span_id": args.root_span, "tool": args.tool, "event_type": args.event_type,
    }
    await _write_stream(client.pages(R.LIST_SPANS, query=params, page_size=args.page_size), args.format, args.output)
    return 0


async def logs_trace(args, client: Client) -> int:
    detail = await client.call(R.GET_TRACE, trace_id=args.trace_id)
    if args.output:
        with _open_output(args.output) as out:
            json.dump(detail, out, indent=2)
            out.write("\n")
        print(f"wrote trace {args.trace_id} ({detail['span_count']} spans) to {args.output}", file=sys.stderr)
    else:
        from client.console import emit

        emit(detail)
    return 0


async def logs_scenarios(args, client: Client) -> int:
    params = {"experiment_id": args.experiment, "status": args.status, "scenario_id": args.scenario}
    await _write_stream(client.pages(R.LIST_SCENARIOS, query=params, page_size=args.page_size), args.format, args.output)
    return 0


async def logs_scores(args, client: Client) -> int:
    params = {"experiment_id": args.experiment, "rule_id": args.rule}
    await _write_stream(client.pages(R.LIST_SCORES, query=params, page_size=args.page_size), args.format, args.output)
    return 0


async def logs_export(args, client: Client) -> int:
    from client.commands.eval import eval_export

    return await eval_export(args, client)
