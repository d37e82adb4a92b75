"""`svc eval run|list|get|metrics|compare|cancel|scenarios|export|import|report|history` (and `svc eval watch`).

`svc eval run SPEC.yaml` prints RunResults JSON on stdout, progress and a summary table with the
verdict counts on stderr, and exits 1 when the experiment did not complete or any scenario did not
pass (under the spec's replica aggregation strategy). `svc eval compare A B --gate` exits 1 on a
significant regression (`--baseline FILE` compares with an exported bundle instead of A).
`--junit/--markdown/--html PATH` write the reports of client/reports.py.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from client.api import Client
from client.routes import R
from client.terminal import printable

STATUS_FILTERS = ("passed", "failed", "flaky", "error", "not_passed", "queued", "running", "cancelled")


def _duration(text: str) -> float:
    from daemon.spec import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _threshold(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected METRIC=VALUE (e.g. pass_rate=0.05), got {text!r}")
    try:
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"threshold {name!r}: {value!r} is not a number")


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {value:g}")
    return value


def _usd(text: str) -> float:
    try:
        value = float(text.lstrip("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an amount in USD, got {text!r}")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive amount in USD, got {text!r}")
    return value


def _report_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--junit", metavar="PATH", help="write JUnit XML (one testcase per scenario)")
    parser.add_argument("--markdown", metavar="PATH", help="write Markdown (for $GITHUB_STEP_SUMMARY or a PR comment)")
    parser.add_argument("--html", metavar="PATH", help="write one self-contained HTML file")


def register(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser("eval", help="experiments: run a spec, list, inspect, compare, gate")
    actions = ev.add_subparsers(dest="action", metavar="ACTION", required=True)

    run = actions.add_parser("run", help="upload a spec, run it as an experiment, wait; exit 1 unless every scenario passed",
                             description="Upload SPEC.yaml, resolve its secrets locally, create and run an experiment, poll until "
                                         "it finishes, print RunResults JSON on stdout and a summary on stderr. Exit 1 when the "
                                         "experiment did not complete or a scenario did not pass under the spec's replica "
                                         "aggregation strategy (a flaky scenario passes only if the strategy accepts it).")
    run.add_argument("spec", metavar="SPEC.yaml|TASK_DIR", help="a spec file, or a Harbor task directory (svc tasks import)")
    run.add_argument("--name", help="experiment name (default: the file name without extension)")
    run.add_argument("--replicas", type=_positive, metavar="N", help="override parallelism.replicas")
    run.add_argument("--concurrency", type=_positive, metavar="N", help="at most N runs of this experiment at once")
    run.add_argument("--filter-failing", metavar="EXPERIMENT", help="re-run only the scenarios that failed, were flaky or errored there")
    run.add_argument("--seed", help="base seed: the same seed reproduces every replica (default: the experiment id)")
    run.add_argument("--replay-models", metavar="EXPERIMENT",
                     help="answer every model call from that experiment's recordings (same scenario and replica; no provider "
                          "is called): iterate on the checks without model cost")
    run.add_argument("--poll", type=_duration, default=2.0, metavar="DURATION", help="poll interval (default 2s)")
    run.add_argument("--wait-timeout", type=_duration, default=600.0, metavar="DURATION", help="give up waiting after (default 10m)")
    run.add_argument("--no-wait", action="store_true", help="print the created experiment and return at once")
    run.add_argument("--check-spec", action="store_true", help="first `svc spec check` the spec with --oracle; "
                                                               "exit 1 without running the experiment when a check is flaky or vacuous")
    run.add_argument("--oracle", metavar="SNAPSHOT", nargs="?", const="",
                     help="with --check-spec: the agent snapshot that solves the task; with a Harbor TASK_DIR (no value): "
                          "the agent is the task's solution/solve.sh")
    run.add_argument("--keep-agent-processes", action="store_true",
                     help="with a Harbor TASK_DIR: keep what the agent started running while test.sh runs, as Harbor does "
                          "(a server the tests query); a process left running can then change what the verifier reads")
    run.add_argument("--check-runs", type=_positive, default=5, metavar="N", help="with --check-spec: runs of each agent (default 5)")
    run.add_argument("--adaptive", type=_positive, metavar="N", help="then up to N more runs for the scenarios whose verdict is "
                     "still undecided (flaky), and wait for them too")
    _report_flags(run)
    out = run.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="only the RunResults JSON (no progress or table on stderr)")
    out.add_argument("--quiet", "-q", action="store_true", help="no JSON on stdout, no progress: only the summary line and the exit code")
    run.set_defaults(func=eval_run)

    ls = actions.add_parser("list", help="experiments, newest first")
    ls.add_argument("--spec", dest="spec_id", help="only this spec")
    ls.add_argument("--status", choices=("created", "running", "completed", "failed", "cancelled"))
    ls.add_argument("--limit", type=_positive, default=100)
    ls.set_defaults(func=eval_list)

    get = actions.add_parser("get", help="an experiment's RunResults")
    get.add_argument("experiment_id")
    get.add_argument("--summary", action="store_true", help="also print the summary table on stderr")
    _report_flags(get)
    get.set_defaults(func=eval_get)

    metrics = actions.add_parser("metrics", help="aggregate metrics of an experiment")
    metrics.add_argument("experiment_id")
    metrics.set_defaults(func=eval_metrics)

    compare = actions.add_parser("compare", help="compare candidate B with baseline A (or --baseline FILE); --gate exits 1 on a "
                                 "regression, 2 when inconclusive",
                                 description="Pair the scenarios of both sides by matrix entry and test the change of each metric "
                                             "(pass rate: a stratified exact test over the replicas, paired by scenario; with one "
                                             "replica per side the exact McNemar test). --gate exits 0 on no_change or improved, "
                                             "1 on a significant regression at --level (with --gate-thresholds also on a crossed "
                                             "fixed threshold) and 2 when inconclusive, naming what would decide it; "
                                             "--allow-inconclusive makes that 2 a 0.")
    compare.add_argument("experiments", nargs="+", metavar="A B", help="baseline and candidate ids (only the candidate with --baseline)")
    compare.add_argument("--baseline", metavar="FILE", help="a bundle from `svc eval export --bundle` as the baseline (not imported)")
    compare.add_argument("--gate", action="store_true", help="exit 1 when the candidate regressed, 2 when the test cannot tell")
    compare.add_argument("--allow-inconclusive", action="store_true", help="with --gate: exit 0 instead of 2 when inconclusive")
    compare.add_argument("--level", type=_level, default=0.05, metavar="P", help="significance level of the paired test (default 0.05)")
    compare.add_argument("--gate-thresholds", action="store_true", help="a crossed fixed threshold is a regression too")
    compare.add_argument("--allow-spec-change", action="store_true", help="compare with a bundle whose spec digest differs")
    compare.add_argument("--threshold", type=_threshold, action="append", default=[], metavar="METRIC=VALUE",
                         help="override a threshold (pass_rate, p95_wall_ms, mean_cost_per_run_usd, tool_success_rate); repeatable")
    compare.add_argument("--adaptive", type=_positive, metavar="N",
                         help="while inconclusive, add up to N more runs to the gated scenarios of both experiments (only the "
                              "candidate's with --baseline FILE), in at most 4 rounds, comparing after each; every look tests at "
                              "--level split over the looks, so the false-alarm rate stays at --level")
    compare.add_argument("--max-cost", type=_usd, metavar="USD", help="with --adaptive: stop before the added runs' recorded cost "
                         "would pass USD")
    compare.add_argument("--poll", type=_duration, default=2.0, metavar="DURATION", help="with --adaptive: poll interval (default 2s)")
    compare.add_argument("--wait-timeout", type=_duration, default=600.0, metavar="DURATION",
                         help="with --adaptive: give up waiting for a round after (default 10m)")
    compare.add_argument("--junit", metavar="PATH", help="write the candidate's JUnit XML with the gate's word and reason as properties")
    compare.add_argument("--markdown", metavar="PATH", help="write a Markdown report of the comparison (PR comment, step summary)")
    compare.add_argument("--html", metavar="PATH", help="write a self-contained HTML report of the candidate and the comparison")
    compare.set_defaults(func=eval_compare)

    cancel = actions.add_parser("cancel", help="cancel a created or running experiment")
    cancel.add_argument("experiment_id")
    cancel.set_defaults(func=eval_cancel)

    scenarios = actions.add_parser("scenarios", help=f"scenarios of an experiment ({R.LIST_SCENARIOS})")
    scenarios.add_argument("--experiment", required=True, metavar="EXPERIMENT")
    scenarios.add_argument("--status", choices=STATUS_FILTERS)
    scenarios.add_argument("--scenario", metavar="SCENARIO_ID")
    scenarios.add_argument("--page-size", type=_positive, default=100)
    scenarios.set_defaults(func=eval_scenarios)

    export = actions.add_parser("export", help="the full bundle of an experiment (spec, scenarios, runs, traces, scores)")
    export.add_argument("experiment_id")
    export.add_argument("--format", choices=("json", "ndjson"), default="json")
    export.add_argument("--bundle", action="store_true", help="a portable baseline: RunResults, metrics, spec and dataset digests "
                        "(compare with `svc eval compare --baseline FILE`, import with `svc eval import FILE`)")
    export.add_argument("--traces", action="store_true", help="with --bundle: include the trace events")
    export.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    export.set_defaults(func=eval_export)

    imp = actions.add_parser("import", help="bring a baseline bundle (svc eval export --bundle) into this daemon as an experiment")
    imp.add_argument("bundle", metavar="FILE")
    imp.set_defaults(func=eval_import)

    report = actions.add_parser("report", help="write an experiment's JUnit XML, Markdown or HTML report")
    report.add_argument("experiment_id")
    _report_flags(report)
    report.set_defaults(func=eval_report)

    history = actions.add_parser("history", help="a spec's experiments with pass rate, cost and p95 wall time")
    history.add_argument("spec_id")
    history.add_argument("--limit", type=_positive, default=100)
    history.set_defaults(func=eval_history)

    try:
        from client.commands.watch import add_watch_parser

        add_watch_parser(actions)
    except ImportError:
        pass


# --- output helpers ------------------------------------------------------------------------------------


def say(message: str = "") -> None:
    print(printable(message), file=sys.stderr, flush=True)


def _fmt_rate(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}"


def _entry_label(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "(no matrix)"
    return ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in entry.items())


def headline(results: dict[str, Any]) -> str:
    metrics = results.get("metrics") or {}
    ci = metrics.get("pass_rate_ci")
    ci_text = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
    return (
        f"experiment {results.get('id')} {results.get('status')}: {metrics.get('total_runs', 0)}/{results.get('total_runs', 0)} runs, "
        f"pass rate {_fmt_rate(metrics.get('pass_rate'))}{ci_text}, cost ${metrics.get('total_cost_usd') or 0:.4f}, "
        f"p95 wall {metrics.get('p95_wall_ms') if metrics.get('p95_wall_ms') is not None else '-'} ms"
    )


def error_reasons(scenario: dict[str, Any]) -> list[str]:
    """Why a scenario's replicas ended in error (`agent_unavailable`, ...), each reason once."""
    reasons: list[str] = []
    for run in scenario.get("runs") or []:
        if isinstance(run, dict) and run.get("verdict") == "error":
            reason = str(run.get("reason") or "error")
            if reason not in reasons:
                reasons.append(reason)
    return reasons


def error_lines(results: dict[str, Any]) -> list[str]:
    """One stderr line per scenario that ended in error: its reasons and first message (with --json
    too, where the table is not printed, so a CI log still says why)."""
    lines = []
    for s in results.get("scenarios") or []:
        if s.get("verdict") != "error":
            continue
        reasons = error_reasons(s) or ["error"]
        message = str(next(iter(s.get("errors") or []), "")).strip()
        message = message.splitlines()[0] if message else ""
        if message.startswith(f"{reasons[0]}: "):  # the daemon's message may start with its reason already
            message = message[len(reasons[0]) + 2:]
        lines.append(f"svc: {s.get('id', '?')} error: {', '.join(reasons)}" + (f": {message[:200]}" if message else ""))
    return lines


def summary_table(results: dict[str, Any]) -> str:
    """The stderr summary: one row per scenario, then the verdict counts and headline numbers."""
    metrics = results.get("metrics") or {}
    rows = [("SCENARIO", "MATRIX", "VERDICT", "STRATEGY", "PASSED", "SCORE", "COST_USD", "REASON")]
    for s in results.get("scenarios") or []:
        strategy = "-" if s.get("passed") is None else ("pass" if s["passed"] else "FAIL")
        rows.append((
            s.get("id", "?"), _entry_label(s.get("matrix_entry"))[:40], s.get("verdict") or s.get("status") or "?", strategy,
            f"{s.get('passed_runs', 0)}/{s.get('replicas', 0)}",
            "-" if s.get("score") is None else f"{s['score']:.2f}",
            "-" if s.get("cost_usd") is None else f"{s['cost_usd']:.4f}",
            ",".join(error_reasons(s)) or "-",
        ))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    v = metrics.get("verdicts") or {}
    lines.append("")
    lines.append(f"verdicts: pass {v.get('pass', 0)} · fail {v.get('fail', 0)} · flaky {v.get('flaky', 0)} · error {v.get('error', 0)}")
    lines.append(headline(results))
    lines.extend(error_lines(results))
    failing = [s for s in results.get("scenarios") or [] if not s.get("passed") and s.get("reproducer")]
    for s in failing[:5]:
        lines.append(f"  reproduce {s['id']} ({_entry_label(s.get('matrix_entry'))}): {s['reproducer']['command']}")
    if len(failing) > 5:
        lines.append(f"  ... and {len(failing) - 5} more (svc eval scenarios --experiment {results.get('id')} --status not_passed)")
    return "\n".join(lines)


def _emit(data: Any) -> None:
    from client.console import emit

    emit(data)


# --- commands -----------------------------------------------------------------------------------------


async def eval_run(args: argparse.Namespace, client: Client) -> int:
    from client.console import CliError
    from client.eval_flow import SecretResolutionError, SpecFileError, WaitTimeout, exit_code, start_spec_file, wait_for_experiment

    verbose = not (args.json or args.quiet)
    if args.check_spec and not await check_spec_first(client, args, verbose):
        return 1
    from client.commands.tasks import is_task_dir, run_task_dir

    if is_task_dir(args.spec):  # the task's generated spec, run by this same flow
        return await run_task_dir(args, client, eval_run)
    try:
        started = await start_spec_file(client, args.spec, name=args.name, replicas=args.replicas, concurrency=args.concurrency,
                                        filter_failing=args.filter_failing, seed=args.seed,
                                        replay_models_from=args.replay_models, text=getattr(args, "spec_text", None))
    except SpecFileError as exc:
        if "\n" not in str(exc):  # a missing file or one issue: that line is the whole story
            raise CliError(str(exc))
        say(str(exc))
        raise CliError(f"{args.spec} is not a valid spec")
    except SecretResolutionError as exc:
        raise CliError(str(exc))
    experiment = started["experiment"]
    if started.get("agent") and not args.quiet:  # agent.source: what was uploaded (client/agent_source.py)
        from client.agent_source import describe

        say(f"svc: {describe(started['agent'])}")
    if verbose:
        say(f"svc: spec '{started['spec']['id']}' version {started['spec']['version']}; experiment {experiment['id']} "
            f"({experiment['name']}): {experiment['total_runs']} runs")
    if args.no_wait:
        if not args.quiet:
            _emit(experiment)
        return 0

    from client.progress import ProgressLine, at_once, experiment_counts

    line = ProgressLine(f"svc: {experiment['id']}")

    def progress(results: dict[str, Any]) -> None:
        if verbose:
            line.update(*experiment_counts(results), at_once=at_once(results))

    from client.build_log import builds_image, follow_builds

    builds = None
    if verbose and builds_image(started["spec"].get("yaml")):  # a Dockerfile base's build log, as its sandboxes boot

        def build_line(text: str) -> None:
            line.finish()
            say(f"svc: {text}")

        builds = asyncio.create_task(follow_builds(client, experiment["id"], build_line, poll_s=min(args.poll, 1.0)))
    try:
        results = await wait_for_experiment(client, experiment["id"], poll_s=args.poll, wait_timeout_s=args.wait_timeout,
                                            on_progress=progress)
    except WaitTimeout as exc:
        line.finish()
        if exc.results is not None and not args.quiet:
            _emit(exc.results)
        raise CliError(str(exc))
    finally:
        if builds is not None:
            builds.cancel()
            await asyncio.gather(builds, return_exceptions=True)
    line.finish()
    if args.adaptive and results.get("status") == "completed":
        results = await adaptive_round(client, args, results, progress)
        line.finish()
    if not args.quiet:
        _emit(results)
    if not args.json:
        say(summary_table(results) if verbose else headline(results))
    elif not args.quiet:  # stdout is the JSON; stderr still says why a scenario ended in error
        for text in error_lines(results):
            say(text)
    await write_reports(client, args, results, quiet=not verbose)
    return exit_code(results)


async def check_spec_first(client: Client, args: argparse.Namespace, verbose: bool) -> bool:
    """--check-spec: `svc spec check` before the experiment; False (reported) when it failed."""
    from client.console import CliError
    from client.commands.spec_check import check_spec, render
    from client.spec_reports import one_line, save_report

    from daemon.tasks import harbor

    target, oracle = args.spec, args.oracle
    if oracle == "" and harbor.is_task_dir(args.spec):
        oracle = None  # a Harbor task run with its solution: that is the oracle
    elif not oracle:
        raise CliError("--check-spec needs --oracle SNAPSHOT (the agent snapshot that solves the task)")
    report = await check_spec(client, target, oracle, args.check_runs, wait_s=args.wait_timeout,
                              progress=say if verbose else None)
    save_report(client.config.home, report)
    say(render(report) if verbose or not report["ok"] else one_line(report))
    return bool(report["ok"])


async def adaptive_round(client: Client, args: argparse.Namespace, results: dict[str, Any], progress: Any) -> dict[str, Any]:
    """--adaptive N: more replicas where the verdict is undecided, then the experiment's results again."""
    from client.eval_flow import extend_undecided

    results, extended = await extend_undecided(client, args.spec, results, args.adaptive, poll_s=args.poll,
                                               wait_timeout_s=args.wait_timeout, on_progress=progress)
    if not args.json:
        say(f"svc: --adaptive: spent {extended['added_runs']} of {args.adaptive} runs on {extended['undecided']} undecided "
            f"scenario(s)" + "".join(f"\n  +{x['added']} {_entry_label(x['matrix_entry'])}" for x in extended["scenarios"]))
    return results


async def eval_list(args: argparse.Namespace, client: Client) -> int:
    _emit(await client.call(R.LIST_EXPERIMENTS, query={"spec_id": args.spec_id, "status": args.status, "limit": args.limit}))
    return 0


async def eval_get(args: argparse.Namespace, client: Client) -> int:
    results = await client.call(R.GET_EXPERIMENT, experiment_id=args.experiment_id)
    _emit(results)
    if args.summary:
        say(summary_table(results))
    await write_reports(client, args, results)
    return 0


async def eval_report(args: argparse.Namespace, client: Client) -> int:
    from client.console import CliError

    if not (args.junit or args.markdown or args.html):
        raise CliError("svc eval report: name at least one of --junit PATH, --markdown PATH, --html PATH")
    results = await client.call(R.GET_EXPERIMENT, experiment_id=args.experiment_id)
    await write_reports(client, args, results)
    return 0


async def write_reports(client: Client, args: argparse.Namespace, results: dict[str, Any], comparison: dict[str, Any] | None = None,
                        quiet: bool = False) -> None:
    """The report files asked for with --junit/--markdown/--html."""
    from client import reports

    outputs: list[tuple[str, Any]] = []
    if getattr(args, "junit", None):
        outputs.append((args.junit, reports.junit(results, comparison)))
    if getattr(args, "markdown", None):
        outputs.append((args.markdown, reports.markdown(results, comparison)))
    if getattr(args, "html", None):
        details = await reports.gather_details(client, results)
        outputs.append((args.html, reports.html(results, details, comparison)))
    for path, data in outputs:
        _write(path, data.encode() if isinstance(data, str) else data)
        if not quiet:
            say(f"svc: wrote {path}")


def _write(path: str, data: bytes) -> None:
    from client.console import CliError

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write the report {path}: {exc.strerror or exc}")


async def eval_metrics(args: argparse.Namespace, client: Client) -> int:
    _emit(await client.call(R.GET_EXPERIMENT_METRICS, experiment_id=args.experiment_id))
    return 0


def read_bundle(path: str) -> dict[str, Any]:
    """A baseline bundle file, checked enough to name what is wrong with it."""
    from client.console import CliError

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError(f"{path}: no such file")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read: {exc}")
    except ValueError as exc:
        raise CliError(f"{path}: not JSON: {exc}")
    if not isinstance(data, dict) or data.get("format") != BUNDLE_FORMAT:
        raise CliError(f"{path}: not a baseline bundle (format is not {BUNDLE_FORMAT!r}); write one with svc eval export EXP --bundle -o FILE")
    return data


async def eval_compare(args: argparse.Namespace, client: Client) -> int:
    from client.console import CliError

    ids = list(args.experiments)
    if args.baseline:
        if len(ids) != 1:
            raise CliError(f"with --baseline FILE give only the candidate experiment, got {len(ids)} ids: {' '.join(ids)}")
        candidate_id = ids[0]
        bundle = read_bundle(args.baseline)
        body: dict[str, Any] = {"baseline_bundle": bundle, "candidate_id": candidate_id}
        baseline_name = f"{bundle['experiment'].get('id')} ({args.baseline})"
    else:
        if len(ids) != 2:
            raise CliError(f"give the baseline and the candidate experiment (A B), or --baseline FILE and the candidate; got {len(ids)} ids")
        body = {"baseline_id": ids[0], "candidate_id": ids[1]}
        candidate_id, baseline_name = ids[1], ids[0]
    body.update(level=args.level, gate_thresholds=args.gate_thresholds)
    if args.allow_spec_change:
        body["allow_spec_change"] = True
    if args.threshold:
        body["thresholds"] = dict(args.threshold)
    if args.max_cost is not None and not args.adaptive:
        raise CliError("--max-cost bounds the runs --adaptive N adds: give --adaptive too")
    if args.adaptive:
        from client.gate_adaptive import adaptive_compare

        def look(step: dict[str, Any]) -> None:
            p = "-" if step["p_value"] is None else f"{step['p_value']:.4g}"
            say(f"svc: --adaptive: look: {step['decision']} (pass rate p={p}) after "
                f"{', '.join(f'+{n} {side}' for side, n in step['added'].items())}")

        result = await adaptive_compare(client, body, runs=args.adaptive, max_cost=args.max_cost, level=args.level,
                                        poll_s=args.poll, wait_timeout_s=args.wait_timeout, on_look=look)
    else:
        result = await client.call(R.COMPARE_EXPERIMENTS, body=body)
    _emit(result)
    if result.get("adaptive"):
        from client.gate_adaptive import adaptive_line

        say(adaptive_line(result["adaptive"]))
    decision = result.get("decision") or ("regressed" if result.get("regressed") else "no_change")
    if result.get("regressed"):
        say(f"svc: {candidate_id} regressed against {baseline_name}:")
        for line in result.get("regressions") or []:
            say(f"  - {line}")
    elif decision == "inconclusive":
        say(f"svc: inconclusive ({candidate_id} vs {baseline_name}): {result.get('reason')}")
    else:
        say(f"svc: no regression: {decision} ({candidate_id} vs {baseline_name}): {result.get('reason')}")
    for metric in result.get("metrics") or []:
        if metric.get("p_value") is not None and metric["name"] != "mean_wall_ms":
            test = "stratified over replicas" if (metric.get("test") or "").startswith("stratified") else "paired over scenarios"
            say(f"  {metric['name']}: {metric['decision']} (p={metric['p_value']:.4g}, {test}, {metric['paired_scenarios']} "
                "paired scenarios)")
    for name in result.get("quarantined") or []:
        say(f"  quarantined (reported, not gated): {name}")
    for warning in result.get("judge_warnings") or []:
        say(f"svc: warning: {warning}")
    changed = result.get("changed_scenarios") or []
    for change in changed[:10]:
        say(f"  scenario {_entry_label(change.get('matrix_entry'))}: {change['baseline']['verdict']} -> {change['candidate']['verdict']}")
    for line in effect_lines(result.get("effects") or []):
        say(line)
    if args.markdown or args.html or args.junit:
        candidate = await client.call(R.GET_EXPERIMENT, experiment_id=candidate_id)
        await write_reports(client, argparse.Namespace(markdown=args.markdown, html=args.html, junit=args.junit), candidate, result)
    return gate_exit_code(decision, args.gate, args.allow_inconclusive)


def effect_lines(scenarios: list[dict[str, Any]], limit: int = 20) -> list[str]:
    """The comparison's effects section: per scenario, what the experiments' runs changed differently
    ("between"), then what differs between one side's replicas."""
    if not scenarios:
        return []
    lines = ["  effects:"]
    for scenario in scenarios[:limit]:
        lines.append(f"    scenario {_entry_label(scenario.get('matrix_entry'))}:")
        for item in sorted(scenario["differences"], key=lambda d: d["side"] != "between"):
            lines.append(f"      - {item['message']}")
    if len(scenarios) > limit:
        lines.append(f"    ... and {len(scenarios) - limit} more scenarios (--json answer: effects)")
    return lines


def gate_exit_code(decision: str, gate: bool, allow_inconclusive: bool = False) -> int:
    """`--gate`: 0 on no_change or improved, 1 on regressed, 2 on inconclusive (0 with --allow-inconclusive)."""
    if not gate:
        return 0
    if decision == "regressed":
        return 1
    if decision == "inconclusive" and not allow_inconclusive:
        return 2
    return 0


async def eval_cancel(args: argparse.Namespace, client: Client) -> int:
    _emit(await client.call(R.CANCEL_EXPERIMENT, experiment_id=args.experiment_id))
    return 0


async def eval_scenarios(args: argparse.Namespace, client: Client) -> int:
    params = {"experiment_id": args.experiment, "status": args.status, "scenario_id": args.scenario}
    async for item in client.pages(R.LIST_SCENARIOS, query=params, page_size=args.page_size):
        sys.stdout.write(json.dumps(item, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


BUNDLE_FORMAT = "svc-baseline-bundle"


async def export_bundle(client: Client, experiment_id: str, traces: bool = False) -> dict[str, Any]:
    """A portable baseline: the experiment's RunResults (scenarios, runs with verdicts, scores, seeds,
    metrics, dataset digest) and the spec's id, version, digest and YAML; trace events optional."""
    from datetime import datetime, timezone

    results = await client.call(R.GET_EXPERIMENT, experiment_id=experiment_id)
    spec = await client.call(R.GET_SPEC, query={"version": results["spec_version"]}, spec_id=results["spec_id"])
    bundle: dict[str, Any] = {
        "format": BUNDLE_FORMAT, "version": 1, "exported_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "experiment": results,
        "spec": {"id": spec["id"], "version": spec["version"], "digest": spec["sha256"], "yaml": spec.get("yaml")},
    }
    if traces:
        raw = await client.call(R.EXPORT_EXPERIMENT, query={"format": "ndjson"}, raw=True, experiment_id=experiment_id,
                                timeout=max(client.config.timeout, 300))
        bundle["traces"] = [item for item in (json.loads(line) for line in raw.splitlines() if line.strip())
                            if item.get("type") == "trace_event"]
    return bundle


async def eval_export(args: argparse.Namespace, client: Client) -> int:
    if args.bundle:
        data = json.dumps(await export_bundle(client, args.experiment_id, args.traces), separators=(",", ":")).encode() + b"\n"
    else:
        data = await client.call(R.EXPORT_EXPERIMENT, query={"format": args.format}, raw=True, experiment_id=args.experiment_id,
                                timeout=max(client.config.timeout, 300))
    if args.output:
        Path(args.output).write_bytes(data)
        say(f"svc: wrote {len(data)} bytes to {args.output}")
    else:
        sys.stdout.buffer.write(data)
        if not data.endswith(b"\n"):
            sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
    return 0


async def eval_import(args: argparse.Namespace, client: Client) -> int:
    bundle = read_bundle(args.bundle)
    results = await client.call(R.IMPORT_EXPERIMENT, body=bundle, timeout=max(client.config.timeout, 300))
    _emit(results)
    imported = results.get("imported") or {}
    say(f"svc: imported {imported.get('experiment_id')} as {results['id']} (spec {results['spec_id']} version {results['spec_version']})")
    return 0


async def eval_history(args: argparse.Namespace, client: Client) -> int:
    _emit(await client.call(R.EVAL_HISTORY, query={"limit": args.limit}, spec_id=args.spec_id))
    return 0
