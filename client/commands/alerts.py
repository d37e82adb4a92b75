"""`svc alerts list|create|get|delete|test|deliveries|rotate-secret`: alert rules on experiment metrics;
`svc alerts default-route get|set|delete`: where behaviors without their own routing send their notices."""
from __future__ import annotations

import argparse

from client.api import Client
from client.commands.common import action_group, add_id_actions, delete_and_say, print_answer
from client.routes import R


def register(sub: argparse._SubParsersAction) -> None:
    actions = action_group(sub, "alerts", "alert rules: notify when an experiment metric crosses a threshold")

    ls = actions.add_parser("list", help="alert rules with their state (ok, firing, no_data)")
    ls.add_argument("--eval", dest="eval_id", help="only the rules of this spec id")
    ls.add_argument("--limit", type=int, default=100)
    ls.set_defaults(func=list_alerts)

    create = actions.add_parser("create", help="create a rule; prints it with its webhook signing secret (shown once)")
    create.add_argument("name")
    create.add_argument("condition", help='"<metric> <op> <value>", e.g. "pass_rate < 0.8"')
    create.add_argument("--eval", dest="eval_id", help="scope to one spec id (default: every spec)")
    create.add_argument("--window", help="last_<N>_runs or last_<N>h, e.g. last_5_runs, last_24h")
    dest = create.add_mutually_exclusive_group(required=True)
    dest.add_argument("--webhook", dest="webhook_url", help="POST the notification here (hooks.slack.com URLs get block messages)")
    dest.add_argument("--chat", dest="slack_channel", help="post to this chat channel through the chat integration")
    dest.add_argument("--email", dest="email_to", help="mail this address (the daemon's SERVICE_SMTP_URL)")
    create.add_argument("--secret", help="webhook signing secret (default: generated)")
    create.set_defaults(func=create_alert)

    add_id_actions(actions, "alert_id", ("get", get_alert, "one rule"), ("delete", delete_alert, "delete a rule"),
                   ("test", test_alert, "send a sample notification now"),
                   ("rotate-secret", rotate_secret, "a new webhook signing secret (printed once)"),
                   ("deliveries", alert_deliveries, "the rule's notifications and their attempts"))

    route = actions.add_parser("default-route", help="the tenant's default route for behaviors without their own notify")
    route_actions = route.add_subparsers(dest="route_action", metavar="ACTION", required=True)
    route_actions.add_parser("get", help="the route (exit 1 when none is set)").set_defaults(func=get_route)
    set_route = route_actions.add_parser("set", help="set the route; prints it with its webhook signing secret")
    route_dest = set_route.add_mutually_exclusive_group(required=True)
    route_dest.add_argument("--webhook", dest="webhook_url", help="POST notices here (hooks.slack.com URLs get block messages)")
    route_dest.add_argument("--chat", dest="slack_channel", help="post to this chat channel through the chat integration")
    route_dest.add_argument("--email", dest="email_to", help="mail this address (the daemon's SERVICE_SMTP_URL)")
    set_route.add_argument("--secret", help="webhook signing secret (default: the current one, else generated)")
    set_route.set_defaults(func=set_route_action)
    route_actions.add_parser("delete", help="remove the route").set_defaults(func=delete_route)


def notify_of(args: argparse.Namespace) -> str:
    return "webhook" if args.webhook_url else "chat" if args.slack_channel else "email"


async def list_alerts(args, client: Client) -> int:
    return await print_answer(client.call(R.LIST_ALERTS, query={"eval_id": args.eval_id, "limit": args.limit}))


async def create_alert(args, client: Client) -> int:
    body = {"name": args.name, "condition": args.condition, "notify": notify_of(args), "eval_id": args.eval_id,
            "window": args.window, "webhook_url": args.webhook_url, "slack_channel": args.slack_channel,
            "email_to": args.email_to, "secret": args.secret}
    return await print_answer(client.call(R.CREATE_ALERT, body={k: v for k, v in body.items() if v is not None}))


async def get_alert(args, client: Client) -> int:
    return await print_answer(client.call(R.GET_ALERT, alert_id=args.alert_id))


async def delete_alert(args, client: Client) -> int:
    return await delete_and_say(client, R.DELETE_ALERT, f"deleted alert {args.alert_id}", alert_id=args.alert_id)


async def test_alert(args, client: Client) -> int:
    from client.console import emit, say

    answer = await client.call(R.TEST_ALERT, alert_id=args.alert_id)
    emit(answer)
    delivery = answer["delivery"]
    if delivery["status"] != "sent":
        say(f"svc: test notification {delivery['status']}: {delivery['last_error'] or delivery['response_status']}")
        return 1
    return 0


async def rotate_secret(args, client: Client) -> int:
    return await print_answer(client.call(R.ROTATE_ALERT_SECRET, alert_id=args.alert_id))


async def alert_deliveries(args, client: Client) -> int:
    return await print_answer(client.call(R.LIST_ALERT_DELIVERIES, alert_id=args.alert_id))


async def get_route(args, client: Client) -> int:
    return await print_answer(client.call(R.GET_ALERT_DEFAULT_ROUTE))


async def set_route_action(args, client: Client) -> int:
    body = {"notify": notify_of(args), "webhook_url": args.webhook_url, "slack_channel": args.slack_channel,
            "email_to": args.email_to, "secret": args.secret}
    return await print_answer(client.call(R.PUT_ALERT_DEFAULT_ROUTE, body={k: v for k, v in body.items() if v is not None}))


async def delete_route(args, client: Client) -> int:
    return await delete_and_say(client, R.DELETE_ALERT_DEFAULT_ROUTE, "deleted the default route")
