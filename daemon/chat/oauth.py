"""The OAuth v2 install flow: authorize URL with a signed state, and the state's checks.

A state is `<base64url payload>.<hex HMAC-SHA256>`; the payload holds a random nonce, the tenant
and the expiry. The key is derived from the client secret, so rotating the secret invalidates
every state issued before. The nonce is recorded at issue and consumed at the callback: a state
works once, for its tenant, for 15 minutes.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from urllib.parse import urlencode

STATE_TTL_S = 15 * 60
MAX_STATE_CHARS = 1024
# SPEC "Team-chat integration": read mentions, post messages, post in channels the bot is not a
# member of, reserved commands, read users, read channel history. No DMs, files or admin.
BOT_SCOPES = ("app_mentions:read", "chat:write", "chat:write.public", "commands", "users:read", "channels:history")


class InvalidState(Exception):
    """The state is malformed, forged, signed with another secret or expired."""


def _key(client_secret: str) -> bytes:
    return hashlib.sha256(b"svc chat oauth state\x00" + client_secret.encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def new_state(client_secret: str, tenant_id: str, now: float | None = None) -> tuple[str, str, float]:
    """(state, nonce, expires_at)."""
    nonce = secrets.token_urlsafe(18)
    expires_at = int(now if now is not None else time.time()) + STATE_TTL_S
    payload = _b64(json.dumps({"n": nonce, "t": tenant_id, "e": expires_at}, separators=(",", ":")).encode())
    signature = hmac.new(_key(client_secret), payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{signature}", nonce, float(expires_at)


def check_state(client_secret: str, state: str, now: float | None = None) -> tuple[str, str]:
    """(nonce, tenant_id) of a well-signed, unexpired state; InvalidState otherwise."""
    if not client_secret or len(state) > MAX_STATE_CHARS or state.count(".") != 1:
        raise InvalidState("malformed")
    payload, signature = state.split(".")
    expected = hmac.new(_key(client_secret), payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        raise InvalidState("bad signature")
    try:
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        nonce, tenant_id, expires_at = str(data["n"]), str(data["t"]), float(data["e"])
    except (ValueError, KeyError, TypeError):
        raise InvalidState("malformed")
    if expires_at <= (now if now is not None else time.time()):
        raise InvalidState("expired")
    return nonce, tenant_id


def authorize_url(authorize_base: str, client_id: str, state: str) -> str:
    separator = "&" if "?" in authorize_base else "?"
    return authorize_base + separator + urlencode({"client_id": client_id, "scope": ",".join(BOT_SCOPES), "state": state})
