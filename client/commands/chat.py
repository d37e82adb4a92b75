"""`svc chat status|install-url|simulate`: the team-chat (Slack) integration.

`simulate` replays Slack-signed fixtures against the running daemon (url_verification, a mention,
its retry, a stale timestamp, a bad signature) and prints each answer's status.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import secrets
import time
from typing import Any

from client.api import ApiError, Client
from client.routes import R

# What the daemon must answer to each fixture.
FIXTURES = (("url_verification", 200), ("mention", 200), ("retry", 200), ("stale_timestamp", 401), ("bad_signature", 401))


def register(sub: argparse._SubParsersAction) -> None:
    chat = sub.add_parser("chat", help="team-chat (Slack) integration: status, install URL, signed-event simulation")
    actions = chat.add_subparsers(dest="action", metavar="ACTION", required=True)

    status = actions.add_parser("status", help="installed workspaces, the last event, and what is configured")
    status.set_defaults(func=chat_status)

    url = actions.add_parser("install-url", help="the Slack authorize URL to open in a browser (valid 15 minutes, once)")
    url.set_defaults(func=install_url)

    simulate = actions.add_parser("simulate", help="replay signed Slack fixtures against the daemon and print each status")
    simulate.add_argument("--signing-secret", help="the Slack signing secret (env SERVICE_CHAT_SIGNING_SECRET)")
    simulate.add_argument("--team", default="T0SIMULATE", help="workspace id of the mention (an installed one gets a reply)")
    simulate.add_argument("--channel", default="C0SIMULATE")
    simulate.add_argument("--text", default="", help="the mention's question (empty: the help reply)")
    simulate.set_defaults(func=simulate_events)


async def chat_status(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.CHAT_STATUS))
    return 0


async def install_url(args, client: Client) -> int:
    from client.console import emit

    emit(await client.call(R.CHAT_INSTALL_URL))
    return 0


def signed(secret: str, body: bytes, timestamp: int) -> dict[str, str]:
    """Headers as Slack sends them: v0= hex HMAC-SHA256 of "v0:<timestamp>:<body>"."""
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}", "Content-Type": "application/json"}


def fixtures(secret: str, team: str, channel: str, text: str) -> list[tuple[str, int, bytes, dict[str, str]]]:
    """(name, expected status, body, headers) of each fixture."""
    now = int(time.time())
    ts = f"{time.time():.6f}"
    challenge = json.dumps({"token": "simulated", "challenge": f"svc-simulate-{now}", "type": "url_verification"}).encode()
    event: dict[str, Any] = {"type": "app_mention", "user": "U0SIMULATE", "text": f"<@U0SVCBOT> {text}".strip(), "ts": ts,
                             "channel": channel, "event_ts": ts}
    mention = json.dumps({"token": "simulated", "team_id": team, "api_app_id": "A0SIMULATE", "event": event,
                          "type": "event_callback", "event_id": f"EvSIM{secrets.token_hex(6).upper()}",
                          "event_time": now}).encode()
    retry = {**signed(secret, mention, now), "X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    return [
        ("url_verification", 200, challenge, signed(secret, challenge, now)),
        ("mention", 200, mention, signed(secret, mention, now)),
        ("retry", 200, mention, retry),
        ("stale_timestamp", 401, mention, signed(secret, mention, now - 6 * 60)),
        ("bad_signature", 401, mention, signed(secret + "-wrong", mention, now)),
    ]


async def simulate_events(args, client: Client) -> int:
    from client.console import CliError, emit, say

    secret = args.signing_secret or os.environ.get("SERVICE_CHAT_SIGNING_SECRET")
    if not secret:
        raise CliError("chat simulate needs the signing secret: --signing-secret or SERVICE_CHAT_SIGNING_SECRET")
    results = []
    for name, expected, body, headers in fixtures(secret, args.team, args.channel, args.text):
        try:
            answer = await client.call(R.CHAT_EVENTS, data=body, headers=headers)
            status = 200
        except ApiError as exc:
            answer, status = exc.body, exc.status
        results.append({"fixture": name, "status": status, "expected": expected, "ok": status == expected, "answer": answer})
    emit(results)
    wrong = [r["fixture"] for r in results if not r["ok"]]
    if wrong:
        say(f"svc: unexpected answers to: {', '.join(wrong)}")
        return 1
    return 0
