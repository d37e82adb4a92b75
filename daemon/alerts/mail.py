"""notify: email through the SMTP server of SERVICE_SMTP_URL (stdlib smtplib, in a worker thread)."""
from __future__ import annotations

import asyncio
import smtplib
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

from daemon.alerts import settings


class EmailUnavailable(Exception):
    """No SMTP server is configured: the notification waits (it is never dropped)."""


def _send(url: str, sender: str, to: str, subject: str, text: str, timeout: float) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise EmailUnavailable("SERVICE_SMTP_URL must look like smtp://host:port")
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = sender, to, subject
    message.set_content(text)
    client_cls = smtplib.SMTP_SSL if parts.scheme == "smtps" else smtplib.SMTP
    with client_cls(parts.hostname, parts.port or (465 if parts.scheme == "smtps" else 25), timeout=timeout) as client:
        if parts.username:
            client.login(unquote(parts.username), unquote(parts.password or ""))
        client.send_message(message)


async def send_email(to: str, subject: str, text: str) -> None:
    """Raises EmailUnavailable (not configured), smtplib.SMTPResponseException (4xx retryable, 5xx
    not) or OSError (network, retryable)."""
    url = settings.smtp_url()
    if not url:
        raise EmailUnavailable("no SMTP server configured (SERVICE_SMTP_URL)")
    await asyncio.to_thread(_send, url, settings.smtp_from(), to, subject, text, settings.timeout_s())
