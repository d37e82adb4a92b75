"""Alert delivery settings, read from the environment at use (like daemon/webhooks' own settings).

SERVICE_SMTP_URL        smtp://host:port (smtps:// for TLS; user:password@ optional) for notify: email
SERVICE_SMTP_FROM       the From address (default svc-alerts@localhost)
SERVICE_ALERT_EMAIL_TO  where a spec's `notify: email` alerts go (a spec alert has no email_to)
SERVICE_ALERT_RETRY_BASE_S  first retry delay; doubles per attempt, with jitter (default 1)
SERVICE_ALERT_TIMEOUT_S     per-attempt timeout (default 10)
SERVICE_ALERT_CHAT_RETRY_S  how often a waiting chat or email notification looks again for its channel (default 10)
"""
from __future__ import annotations

import os

MAX_RETRIES = 3
DEDUP_WINDOW_S = 300


def _float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        return default


def retry_base_s() -> float:
    return _float("SERVICE_ALERT_RETRY_BASE_S", 1.0)


def timeout_s() -> float:
    return _float("SERVICE_ALERT_TIMEOUT_S", 10.0)


def chat_retry_s() -> float:
    return _float("SERVICE_ALERT_CHAT_RETRY_S", 10.0)


def smtp_url() -> str:
    return os.environ.get("SERVICE_SMTP_URL", "")


def smtp_from() -> str:
    return os.environ.get("SERVICE_SMTP_FROM") or "svc-alerts@localhost"


def spec_email_to() -> str:
    return os.environ.get("SERVICE_ALERT_EMAIL_TO", "")
