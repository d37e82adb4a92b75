"""`svc judges list|get|create|eval|calibrate|delete`: LLM judges."""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from client.api import Client
from client.commands.answers import emit_model, typed
from client.commands.common import action_group, add_id_actions, add_list, json_lines

CALIBRATE_TIMEOUT_S = 1800.0  # up to 1000 judge calls, 8 at a time
EVAL_TIMEOUT_S = 600.0  # 3 attempts of up to SERVICE_JUDGE_TIMEOUT_S each, and a reformat request


def register(sub: argparse._SubParsersAction) -> None:
    actions = action_group(sub, "judges", "LLM judges: define, evaluate, calibrate against labelled examples")
    add_list(actions, list_judges, "judges, newest first")
    add_id_actions(actions, "judge_id", ("get", get_judge, "one judge with its last calibration"))

    create = actions.add_parser("create", help="create a judge (a classifier when --choice is given)")
    create.add_argument("--name", required=True)
    rubric = create.add_mutually_exclusive_group(required=True)
    rubric.add_argument("--rubric", help="what the judge grades against")
    rubric.add_argument("--rubric-file", help="read the rubric from a file")
    create.add_argument("--model", help="default: the daemon's SERVICE_JUDGE_MODEL")
    create.add_argument("--threshold", type=float, help="a score at or above it passes (default 0.5)")
    create.add_argument("--choice", action="append", default=[], metavar="LABEL=SCORE",
                        help="a classifier label and its score in [0, 1]; repeat for each label")
    create.set_defaults(func=create_judge)

    ev = actions.add_parser("eval", help="judge one output; exit 1 when the judge call failed")
    ev.add_argument("judge_id")
    ev.add_argument("--input", required=True, help="text, or @file")
    ev.add_argument("--output", required=True, help="text, or @file")
    ev.add_argument("--expected", help="text, or @file")
    ev.add_argument("--no-cache", action="store_true", help="ask the judge even when an identical call is cached")
    ev.set_defaults(func=eval_judge)

    cal = actions.add_parser("calibrate", help="measure agreement with labelled examples from a JSON or JSONL file")
    cal.add_argument("judge_id")
    cal.add_argument("file", help="a JSON array (or {examples: [...]}) or JSON lines of {input, output, expected?, label: true|false}")
    cal.add_argument("--no-cache", action="store_true")
    cal.set_defaults(func=calibrate_judge)

    add_id_actions(actions, "judge_id", ("delete", delete_judge, "delete a judge"))


def _text(value: str | None) -> str | None:
    if value is not None and value.startswith("@"):
        return Path(value[1:]).read_text()
    return value


def parse_choices(items: list[str]) -> dict[str, float]:
    from client.console import CliError

    choices: dict[str, float] = {}
    for item in items:
        label, sep, score = item.rpartition("=")
        try:
            value = float(score) if sep and label else None
        except ValueError:
            value = None
        if value is None:
            raise CliError(f"--choice {item!r}: expected LABEL=SCORE with a number, e.g. polite=1")
        choices[label] = value
    return choices


def read_examples(path: str) -> list[Any]:
    """A JSON array, an object {examples: [...]}, or one JSON object per line."""
    from client.console import CliError

    text = Path(path).read_text()
    try:
        data = json.loads(text)
    except ValueError:
        return json_lines(path, text)[0]
    if isinstance(data, dict) and isinstance(data.get("examples"), list):
        return data["examples"]
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        return [data]
    raise CliError(f"{path}: expected a JSON array of labelled examples or JSON lines")


async def list_judges(args, client: Client) -> int:
    return emit_model(await typed(client).list_judges(limit=args.limit))


async def get_judge(args, client: Client) -> int:
    from client.console import say

    judge = await typed(client).judge(args.judge_id)
    for warning in judge.calibration.warnings if judge.calibration else []:
        say(f"svc: calibration warning: {warning}")
    return emit_model(judge)


async def create_judge(args, client: Client) -> int:
    from client.console import say

    body: dict[str, Any] = {"name": args.name, "rubric": _text("@" + args.rubric_file) if args.rubric_file else args.rubric}
    if args.model:
        body["model"] = args.model
    if args.threshold is not None:
        body["threshold"] = args.threshold
    if args.choice:
        body.update(kind="classifier", choices=parse_choices(args.choice))
    judge = await typed(client).create_judge(body)
    say(f"created judge {judge.id} ({judge.kind})")
    return emit_model(judge)


async def eval_judge(args, client: Client) -> int:
    from client.console import say

    body: dict[str, Any] = {"input": _text(args.input), "output": _text(args.output)}
    if args.expected is not None:
        body["expected"] = _text(args.expected)
    verdict = await typed(client).judge_eval(args.judge_id, body, cache=not args.no_cache,
                                             timeout=max(client.config.timeout, EVAL_TIMEOUT_S))
    emit_model(verdict)
    if verdict.judge_error is not None:
        say(f"svc: the judge call failed ({verdict.judge_error.code}): {verdict.judge_error.message}")
        return 1
    return 0


async def calibrate_judge(args, client: Client) -> int:
    from client.console import say

    examples = read_examples(args.file)
    result = await typed(client).calibrate_judge(args.judge_id, examples, cache=not args.no_cache,
                                                 timeout=max(client.config.timeout, CALIBRATE_TIMEOUT_S))
    for warning in result.warnings:
        say(f"svc: warning: {warning}")
    return emit_model(result)


async def delete_judge(args, client: Client) -> int:
    from client.console import say

    await typed(client).delete_judge(args.judge_id)
    say(f"deleted judge {args.judge_id}")
    return 0
