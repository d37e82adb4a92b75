"""Printing the typed client's answers (client/typed.py) as the daemon sent them."""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from client.api import Client
from client.typed import TypedApi


def typed(client: Client) -> TypedApi:
    return TypedApi(client)


def plain(model: BaseModel) -> Any:
    """The answer as JSON data, without fields the daemon did not send (e.g. a secret shown only once)."""
    return model.model_dump(mode="json", exclude_unset=True)


def emit_model(model: BaseModel) -> int:
    """Print the answer as JSON on stdout; exit 0."""
    from client.console import emit

    emit(plain(model))
    return 0
