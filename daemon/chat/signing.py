"""Slack request signatures: `v0=` hex HMAC-SHA256 of `v0:<timestamp>:<raw body>` with the signing
secret, compared in constant time, timestamps within 5 minutes (slack_sdk's SignatureVerifier)."""
from __future__ import annotations

from slack_sdk.signature import SignatureVerifier

REPLAY_WINDOW_S = 5 * 60  # what SignatureVerifier enforces; SPEC "Limits": chat signature replay window


def is_signed(signing_secret: str, body: bytes, timestamp: str | None, signature: str | None) -> bool:
    """Whether the request was signed by Slack within the replay window. Never raises: a missing
    secret, a malformed timestamp or a body that is not UTF-8 is simply not signed."""
    if not signing_secret or not timestamp or not signature:
        return False
    if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
        return False
    try:
        return SignatureVerifier(signing_secret).is_valid(body, timestamp, signature)
    except (ValueError, UnicodeDecodeError):
        return False
