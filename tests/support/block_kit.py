"""Slack Block Kit limits (api.slack.com/reference/block-kit) checked on a posted message, on top of
slack_sdk's own model validation: what Slack would refuse with `invalid_blocks`."""
from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import Block

BLOCK_TYPES = {"section", "actions", "context", "divider", "header", "image", "input", "rich_text"}


def violations(blocks: list[dict[str, Any]]) -> list[str]:
    """Every limit the message breaks; empty when Slack accepts it."""
    found = [] if len(blocks) <= 50 else [f"{len(blocks)} blocks (max 50)"]
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        if block.get("type") not in BLOCK_TYPES:
            found.append(f"{where}.type {block.get('type')!r}")
            continue
        try:
            Block.parse(block).validate_json()
        except Exception as exc:  # slack_sdk raises SlackObjectFormationError
            found.append(f"{where}: {exc}")
        text = (block.get("text") or {}).get("text", "")
        if len(text) > 3000:
            found.append(f"{where}.text: {len(text)} characters (max 3000)")
        fields = block.get("fields") or []
        if len(fields) > 10:
            found.append(f"{where}.fields: {len(fields)} (max 10)")
        found += [f"{where}.fields[{j}]: {len(f['text'])} characters (max 2000)" for j, f in enumerate(fields) if len(f["text"]) > 2000]
        for j, element in enumerate(block.get("elements") or []):
            found += _button(f"{where}.elements[{j}]", element)
    return found


def _button(where: str, element: dict[str, Any]) -> list[str]:
    if element.get("type") != "button":
        return []
    found = []
    if element["text"].get("type") != "plain_text" or len(element["text"]["text"]) > 75:
        found.append(f"{where}.text: plain_text of at most 75 characters")
    if len(element.get("value", "")) > 2000:
        found.append(f"{where}.value: {len(element['value'])} characters (max 2000)")
    if len(element.get("url", "")) > 3000:
        found.append(f"{where}.url: longer than 3000")
    if len(element.get("action_id", "")) > 255:
        found.append(f"{where}.action_id: longer than 255")
    return found
