"""`svc investigate "question"`: ask the investigation agent (a conversation on the daemon)."""
from __future__ import annotations

import argparse

from client.api import Client
from client.routes import R

ANSWER_TIMEOUT_S = 600  # the agent may call the model several times


def register(sub: argparse._SubParsersAction) -> None:
    investigate = sub.add_parser("investigate", help='ask the investigation agent, e.g. svc investigate "why did exp-... fail?"')
    investigate.add_argument("question")
    investigate.add_argument("--conversation", help="continue this conversation (conv_...) instead of starting one")
    investigate.set_defaults(func=ask)


async def ask(args, client: Client) -> int:
    from client.console import CliError, emit, say

    if not args.question.strip():
        raise CliError("the question is empty")
    conversation_id = args.conversation
    if not conversation_id:
        conversation = await client.call(R.CREATE_CONVERSATION, body={"title": args.question.strip()[:200]})
        conversation_id = conversation["id"]
    reply = await client.call(R.POST_MESSAGE, body={"content": args.question}, conversation_id=conversation_id,
                                 timeout=max(client.config.timeout, ANSWER_TIMEOUT_S))
    emit(reply)
    if reply["answer"].get("error"):
        say(f"svc: the investigation model failed ({reply['answer']['error']}); conversation {conversation_id}")
        return 1
    return 0
