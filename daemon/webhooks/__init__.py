"""Webhook destinations and signed delivery (DECISIONS "Webhooks and alerts").

* ``POST /v1/webhooks {url, events, secret?}`` registers a destination for ``run.completed`` and/or
  ``replica.completed``; the secret (generated when not given) is shown once.
* Each event is POSTed as JSON with ``X-Svc-Event``, ``X-Svc-Delivery`` (stable across retries) and
  ``X-Svc-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>``.
* The URL may not name or resolve to a link-local or cloud metadata address, nor (unless the operator
  sets SERVICE_OUTBOUND_ALLOW_PRIVATE=1) a loopback, private or host address (daemon.netguard): refused
  at registration (400) and checked again before every send, which is then refused without sending
  (``failed``, no retry). Redirects are not followed.
* A 2xx answer delivers. 5xx and network errors (including the 10 s timeout) are retried 3 times; a
  send without an HTTP answer records ``netguard.NO_ANSWER`` whatever the cause (no port-scan oracle).
  with exponential backoff and jitter; any other answer fails at once. Every attempt is recorded in
  the delivery log (``GET /v1/webhooks/{id}/deliveries``). Deliveries still pending when the daemon
  stops are resumed at the next start.

Other modules call ``await emit(app, tenant_id, "run.completed", run_body)``.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import os
import random
import secrets as _secrets
import time
from typing import Any

import aiohttp
from aiohttp import web

from daemon.netguard import UnsafeURL, check_outbound_url, guarded_connector, no_answer
from daemon.store import webhooks as hook_store
from daemon.store.db import dumps
from daemon.util import new_id, now_iso
from daemon.appkeys import STORE

log = logging.getLogger("svcd.webhooks")

EVENTS = ("run.completed", "replica.completed")
MAX_RETRIES = 3
SIGNATURE_TOLERANCE_S = 300


def backoff_base_s() -> float:
    return float(os.environ.get("SERVICE_WEBHOOK_BACKOFF_S") or 1.0)


def timeout_s() -> float:
    return float(os.environ.get("SERVICE_WEBHOOK_TIMEOUT_S") or 10.0)


def new_secret() -> str:
    return "whsec_" + _secrets.token_urlsafe(24)


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``X-Svc-Signature`` header value for ``body``."""
    t = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify(secret: str, header: str, body: bytes, tolerance_s: int = SIGNATURE_TOLERANCE_S, now: float | None = None) -> bool:
    """Check an ``X-Svc-Signature`` header (what a receiver does)."""
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        t = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs((time.time() if now is None else now) - t) > tolerance_s:
        return False
    expected = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, v) for k, v in parts.items() if k == "v1")


def hook_body(row: Any, secret: bool = False) -> dict[str, Any]:
    body = {
        "id": row["id"],
        "url": row["url"],
        "events": json.loads(row["events"]),
        "secret_prefix": row["secret"][:10],
        "created_at": row["created_at"],
    }
    if secret:
        body["secret"] = row["secret"]
    return body


def delivery_body(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "webhook_id": row["webhook_id"],
        "event": row["event"],
        "status": row["status"],
        "attempts": row["attempts"],
        "response_status": row["response_status"],
        "error": row["error"],
        "created_at": row["created_at"],
        "last_attempt_at": row["last_attempt_at"],
        "delivered_at": row["delivered_at"],
        "payload": json.loads(row["payload"]),
    }


class Dispatcher:
    """Schedules deliveries as background tasks owned by the app."""

    def __init__(self, app: Any):
        self.app = app
        self.tasks: set[asyncio.Task] = set()
        self._session: aiohttp.ClientSession | None = None

    @property
    def store(self):
        return self.app[STORE]

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # the resolver refuses link-local / metadata answers at connect time (daemon.netguard)
            self._session = aiohttp.ClientSession(headers={"User-Agent": "svcd-webhooks/1"}, connector=guarded_connector())
        return self._session

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    async def emit(self, tenant_id: str, event: str, payload: Any) -> list[str]:
        """Queue ``event`` for every destination of the tenant subscribed to it; returns delivery ids."""
        hooks = await hook_store.of_tenant(self.store, tenant_id)
        ids = []
        text = dumps(payload)
        for hook in hooks:
            if event not in json.loads(hook["events"]):
                continue
            delivery_id = new_id("dlv_")
            await hook_store.insert_delivery(self.store, delivery_id=delivery_id, hook_id=hook["id"], tenant_id=tenant_id,
                                             event=event, payload=text, created_at=now_iso())
            self.schedule(delivery_id)
            ids.append(delivery_id)
        return ids

    def schedule(self, delivery_id: str) -> None:
        task = asyncio.create_task(self._deliver(delivery_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def resume_pending(self) -> int:
        rows = await hook_store.pending_ids(self.store)
        for row in rows:
            self.schedule(row["id"])
        return len(rows)

    async def _deliver(self, delivery_id: str) -> None:
        row = await hook_store.delivery_with_hook(self.store, delivery_id)
        if row is None:
            return
        body = row["payload"].encode()
        attempts = row["attempts"]
        while True:
            attempts += 1
            try:
                await check_outbound_url(row["url"])  # again at every send: DNS may have changed
            except UnsafeURL as exc:
                status, error, retryable = None, f"refused, not sent: {exc}", False
            else:
                status, error = await self._attempt(row["url"], row["secret"], row["event"], delivery_id, body)
                retryable = status is None or status >= 500
            if status is not None and 200 <= status < 300:
                final = "delivered"
            elif retryable and attempts <= MAX_RETRIES:
                final = "pending"
            else:
                final = "failed"
            await hook_store.record_attempt(self.store, delivery_id, status=final, attempts=attempts, response_status=status,
                                            error=error, at=now_iso(), delivered_at=now_iso())
            if final != "pending":
                if final == "failed":
                    log.warning("webhook delivery %s to %s failed after %d attempts: %s", delivery_id, row["url"], attempts, error or status)
                return
            delay = backoff_base_s() * (2 ** (attempts - 1)) * (0.5 + random.random())
            await asyncio.sleep(delay)

    async def _attempt(self, url: str, secret: str, event: str, delivery_id: str, body: bytes) -> tuple[int | None, str | None]:
        headers = {
            "Content-Type": "application/json",
            "X-Svc-Event": event,
            "X-Svc-Delivery": delivery_id,
            "X-Svc-Signature": sign(secret, body),
        }
        try:
            async with self.session().post(url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s()),
                                           allow_redirects=False) as response:
                await response.read()
                return response.status, None if response.status < 400 else f"HTTP {response.status}"
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as exc:
            # one text whatever the cause: refused, closed, unreachable and timed out look alike
            return None, no_answer(exc, url)


WEBHOOKS = web.AppKey("webhooks", Dispatcher)


async def emit(app: Any, tenant_id: str, event: str, payload: Any) -> list[str]:
    """Queue a webhook event (no-op when the webhooks module is not mounted)."""
    dispatcher: Dispatcher | None = app.get(WEBHOOKS) if hasattr(app, "get") else None
    if dispatcher is None:
        return []
    try:
        return await dispatcher.emit(tenant_id, event, payload)
    except Exception:  # a webhook problem must never break the caller
        log.exception("cannot queue webhook event %s", event)
        return []
