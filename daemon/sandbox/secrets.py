"""A sandbox's secrets: the values sent with the request, plus `dashboard` ones from the daemon's
own store (DECISIONS "Spec document shapes").

    API_KEY: env                      resolved by the client (its environment, then .env)
    DB_PW: "env:OTHER_NAME"           resolved by the client
    TOKEN: "file:~/.tokens/x"         resolved by the client (relative to the spec file)
    SIGNING: "command:pass show x"    resolved by the client (runs on the user's machine)
    SLACK: dashboard                  the daemon's own secret store (PUT /v1/secrets/{name})

The daemon never runs a command, reads a host file or reads its own environment because a spec
(or a request) names it: `env`, `env:NAME`, `file:` and `command:` sources are resolved by the svc
CLI (and the TUI, watch mode and the MCP server) on the user's machine and sent as values
(`secrets: {NAME: value}`). A declared secret with no value fails the boot, naming it; there is no
fallback. A value sent with the request wins over a `dashboard` source. Messages name secrets and
their source kind, never a value.
"""
from __future__ import annotations

from typing import Awaitable, Callable, Mapping


class SecretError(Exception):
    pass


def _source_kind(source: str) -> str:
    text = (source or "").strip()
    return text.split(":", 1)[0] if text else "?"


async def resolve_secrets(
    declared: Mapping[str, str],
    provided: Mapping[str, str] | None,
    dashboard: Callable[[], Awaitable[Mapping[str, str]]],
) -> dict[str, str]:
    """Every declared secret plus every provided one, as {name: value}."""
    provided = dict(provided or {})
    resolved: dict[str, str] = {}
    dashboard_values: Mapping[str, str] | None = None
    missing: list[str] = []
    for name, source in declared.items():
        if name in provided:
            value = provided.pop(name)
            if value is None or value == "":
                raise SecretError(f"secret '{name}' was passed with the request but is empty")
            resolved[name] = str(value)
            continue
        kind = _source_kind(source)
        if kind == "dashboard":
            if dashboard_values is None:
                dashboard_values = await dashboard()
            stored = dashboard_values.get(name)
            if not stored:
                raise SecretError(
                    f"secret '{name}' (source dashboard) is missing: store it with `PUT /v1/secrets/{name}` first"
                )
            resolved[name] = stored
            continue
        missing.append(f"'{name}' (source {kind})")
    if missing:
        several = len(missing) > 1
        raise SecretError(
            f"secret{'s' if several else ''} {', '.join(missing)} {'were' if several else 'was'} not sent with the request. "
            "The daemon never resolves env, file or command sources itself: the svc CLI (svc eval run, svc runs create, "
            "svc sandboxes create, svc replicas run, the TUI, watch mode, the MCP server) resolves "
            f"{'them' if several else 'it'} on your machine and sends the value{'s' if several else ''}; "
            "or pass it in the request's `secrets`, or store it with `PUT /v1/secrets/NAME` and use source dashboard"
        )
    for name, value in provided.items():
        if value is None or value == "":
            raise SecretError(f"secret '{name}' was passed with the request but is empty")
        resolved[name] = str(value)
    return resolved
