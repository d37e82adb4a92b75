"""`svc score-rules list|create|delete` and `svc eval score <experiment>`: score rules and offline
scoring. (`svc logs scores` lives with the other `logs` commands.)"""
from __future__ import annotations

import argparse
from typing import Any

from client.api import Client
from client.commands.answers import emit_model, plain, typed
from client.commands.common import action_group, add_id_actions

RULE_TYPES = ("llm_judge", "regex", "python")
EVENT_TYPES = ("llm_call", "tool_use", "tool_call")


def register(sub: argparse._SubParsersAction) -> None:
    actions = action_group(sub, "score-rules", "rules that score an experiment's spans (llm_judge, regex, python)")

    ls = actions.add_parser("list", help="score rules, newest first")
    ls.add_argument("--eval", dest="eval_id", help="only the rules scoped to this spec id")
    ls.add_argument("--page-size", type=int, default=100)
    ls.set_defaults(func=list_rules)

    create = actions.add_parser("create", help="create a rule: --rubric (or --judge) for llm_judge, --pattern for regex, "
                                               "--command for python")
    create.add_argument("name")
    create.add_argument("--type", required=True, choices=RULE_TYPES)
    create.add_argument("--rubric")
    create.add_argument("--pattern")
    create.add_argument("--command", help="run in a throw-away python sandbox: spans as JSON lines on stdin, one "
                                          "{span_id, score, passed, reason} line per span on stdout")
    create.add_argument("--judge", dest="judge_id", help="a stored judge id (llm_judge)")
    create.add_argument("--model")
    create.add_argument("--threshold", type=float, help="passed when score >= threshold (default 0.5)")
    create.add_argument("--eval", dest="eval_id", help="scope to a spec id: its experiments are scored when they complete")
    create.add_argument("--event-type", choices=EVENT_TYPES, help="only spans of this event type")
    create.add_argument("--tool", help="only spans of this tool")
    create.set_defaults(func=create_rule)

    add_id_actions(actions, "rule_id", ("delete", delete_rule, "delete a rule (its score rows stay)"))

    score = _subcommands(sub, "eval").add_parser("score", help="score an experiment's spans with its rules (or --rule ...); "
                                                               "waits and prints the per-rule aggregates")
    score.add_argument("experiment_id")
    score.add_argument("--rule", dest="rule_ids", action="append", metavar="RULE_ID", help="a rule id; repeatable")
    score.add_argument("--no-wait", action="store_true", help="print {job_id, status} and return")
    score.set_defaults(func=eval_score)


def _subcommands(sub: argparse._SubParsersAction, name: str) -> argparse._SubParsersAction:
    """The ACTION subparsers of an existing command (`eval`), so `eval score` is registered here."""
    parser = sub.choices[name]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


async def list_rules(args: argparse.Namespace, client: Client) -> int:
    from client.console import emit

    api, rules, cursor = typed(client), [], None
    while True:
        page = await api.list_score_rules(eval_id=args.eval_id, limit=args.page_size, cursor=cursor)
        rules.extend(plain(rule) for rule in page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    emit(rules)
    return 0


async def create_rule(args: argparse.Namespace, client: Client) -> int:
    body: dict[str, Any] = {"name": args.name, "type": args.type}
    for key in ("rubric", "pattern", "command", "judge_id", "model", "threshold", "eval_id"):
        if getattr(args, key) is not None:
            body[key] = getattr(args, key)
    applies_to = {k: v for k, v in (("event_type", args.event_type), ("tool", args.tool)) if v is not None}
    if applies_to:
        body["applies_to"] = applies_to
    return emit_model(await typed(client).create_score_rule(body))


async def delete_rule(args: argparse.Namespace, client: Client) -> int:
    from client.console import say

    await typed(client).delete_score_rule(args.rule_id)
    say(f"svc: deleted score rule {args.rule_id}")
    return 0


async def eval_score(args: argparse.Namespace, client: Client) -> int:
    from client.console import emit, say

    api = typed(client)
    accepted = await api.score_experiment(args.experiment_id, args.rule_ids)
    if args.no_wait:
        return emit_model(accepted)
    job = None
    async for event in api.score_job_events(accepted.job_id):
        job = event.job  # the stream ends after its `done` event
    if job is None or job.status not in ("completed", "failed"):
        job = await api.score_job(accepted.job_id)
    if job.status == "failed":
        say(f"svc: scoring job {job.id} failed: {job.error}")
        return 1
    scores = plain(await api.experiment_scores(args.experiment_id))
    emit({"job": plain(job), **{k: v for k, v in scores.items() if k != "items"}})
    say(f"svc: scored {job.done} span-rule pairs ({job.errors} judge errors)")
    return 0
