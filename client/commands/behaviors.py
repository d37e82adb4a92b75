"""`svc behaviors list|get|stats|create-binary|create-classifier|delete`: detections with a baseline
whose crossing latches and notifies."""
from __future__ import annotations

import argparse

from client.api import Client
from client.commands.alerts import notify_of
from client.commands.answers import emit_model, typed
from client.commands.common import action_group, add_id_actions, add_list


def _routing(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name")
    parser.add_argument("--baseline", dest="baseline_pct", type=float, required=True, help="rate threshold, e.g. 0.2 for 20%%")
    parser.add_argument("--direction", dest="baseline_direction", choices=("above", "below", "either"), default="above",
                        help="which side of the baseline is a breach (default: above; either: a crossing either way)")
    parser.add_argument("--description")
    dest = parser.add_mutually_exclusive_group()
    dest.add_argument("--webhook", dest="webhook_url", help="send breach and recovery notices here")
    dest.add_argument("--chat", dest="slack_channel", help="post them to this chat channel")
    dest.add_argument("--email", dest="email_to", help="mail them to this address")


def register(sub: argparse._SubParsersAction) -> None:
    actions = action_group(sub, "behaviors", "behaviors: detection rates against a baseline, with a breach latch")
    add_list(actions, list_behaviors, "behaviors and whether they are breached")

    binary = actions.add_parser("create-binary", help="a yes/no detection")
    _routing(binary)
    binary.add_argument("--judge", dest="judge_id", help="a stored judge producing the verdicts")
    binary.add_argument("--rule", dest="rule_id", help="a score rule producing the verdicts")
    binary.set_defaults(func=create_behavior, kind="binary")

    classifier = actions.add_parser("create-classifier", help="a detection with labels, fed by a judge or a score rule")
    _routing(classifier)
    source = classifier.add_mutually_exclusive_group(required=True)
    source.add_argument("--judge", dest="judge_id", help="a stored classifier judge")
    source.add_argument("--rule", dest="rule_id", help="a score rule")
    classifier.add_argument("--labels", help="comma-separated labels the verdicts may carry")
    classifier.set_defaults(func=create_behavior, kind="classifier")

    add_id_actions(actions, "behavior_id", ("get", get_behavior, "one behavior"),
                   ("stats", behavior_stats, "rate, sample and latch"),
                   ("delete", delete_behavior, "delete a behavior and its verdicts"))


async def list_behaviors(args, client: Client) -> int:
    return emit_model(await typed(client).list_behaviors(limit=args.limit))


async def create_behavior(args, client: Client) -> int:
    routed = args.webhook_url or args.slack_channel or args.email_to
    labels = [label.strip() for label in args.labels.split(",") if label.strip()] if getattr(args, "labels", None) else None
    body = {"name": args.name, "kind": args.kind, "baseline_pct": args.baseline_pct, "baseline_direction": args.baseline_direction,
            "description": args.description, "judge_id": args.judge_id, "rule_id": args.rule_id, "labels": labels,
            "notify": notify_of(args) if routed else None, "webhook_url": args.webhook_url, "slack_channel": args.slack_channel,
            "email_to": args.email_to}
    return emit_model(await typed(client).create_behavior({k: v for k, v in body.items() if v is not None}))


async def get_behavior(args, client: Client) -> int:
    return emit_model(await typed(client).behavior(args.behavior_id))


async def behavior_stats(args, client: Client) -> int:
    return emit_model(await typed(client).behavior_stats(args.behavior_id))


async def delete_behavior(args, client: Client) -> int:
    from client.console import say

    await typed(client).delete_behavior(args.behavior_id)
    say(f"deleted behavior {args.behavior_id}")
    return 0
