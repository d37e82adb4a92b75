"""The delivery worker: sends what the outbox holds, records every attempt, resumes after a restart.

Exactly-once as far as a network allows: a row is marked `sent` only after the destination answered
2xx, in the same transaction as its attempt record. A daemon killed after the evaluation and before
(or during) the send finds the row still `pending` at its next start and sends it then, so nothing
is lost; the dedup key kept the decision itself from being queued twice, and a resend after a crash
mid-send carries the same `X-Svc-Delivery` id (the outbox row id), which is what a receiver
deduplicates on. Marking `sent` before sending would instead lose the notification on a crash.
"""
from __future__ import annotations

import asyncio
import importlib
import json
import logging
import random
import smtplib
import time
from typing import Any

import aiohttp

from daemon.alerts import settings
from daemon.alerts.mail import EmailUnavailable, send_email
from daemon.alerts.messages import blocks, email_text
from daemon.netguard import UnsafeURL, check_outbound_url, guarded_connector, no_answer
from daemon.store import alerts as alert_store
from daemon.store import behaviors as behavior_store
from daemon.util import now_iso
from daemon.webhooks import sign
from daemon.appkeys import STORE

log = logging.getLogger("svcd.alerts")
BATCH = 50  # notifications in flight at once


class Waiting(Exception):
    """The channel cannot send yet (chat not installed, no SMTP server): the row stays pending."""


class DeliveryWorker:
    def __init__(self, app: Any):
        self.app = app
        self.inflight: set[str] = set()
        self.tasks: set[asyncio.Task] = set()
        self._wake = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.Task | None = None

    @property
    def store(self):
        return self.app[STORE]

    def start(self) -> None:
        self._loop = asyncio.create_task(self._run())

    async def close(self) -> None:
        for task in [self._loop, *self.tasks]:
            if task is not None:
                task.cancel()
        await asyncio.gather(*[t for t in [self._loop, *self.tasks] if t is not None], return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                for row in await alert_store.due(self.store, time.time(), BATCH):
                    if row["id"] not in self.inflight:
                        self._spawn(row["id"])
            except Exception:
                log.exception("alert outbox poll failed")
            try:
                await asyncio.wait_for(self._wake.wait(), min(0.5, settings.retry_base_s()))
            except asyncio.TimeoutError:
                pass

    def _spawn(self, outbox_id: str) -> None:
        self.inflight.add(outbox_id)
        task = asyncio.create_task(self._attempt_guarded(outbox_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _attempt_guarded(self, outbox_id: str) -> None:
        try:
            await self.attempt(outbox_id)
        except Exception:
            log.exception("alert notification %s: attempt failed", outbox_id)
        finally:
            self.inflight.discard(outbox_id)
            self.wake()  # a slot is free: more due rows may be waiting (at most BATCH are in flight)

    async def send_now(self, outbox_id: str) -> None:
        """One attempt right away (POST /v1/alerts/{id}/test); retries continue in the background."""
        if outbox_id in self.inflight:
            return
        self.inflight.add(outbox_id)
        try:
            await self.attempt(outbox_id)
        finally:
            self.inflight.discard(outbox_id)

    async def attempt(self, outbox_id: str) -> None:
        row = await alert_store.get_outbox(self.store, outbox_id)
        if row is None or row["status"] != "pending":
            return
        owner = await self._owner(row)
        if owner is None:
            return  # its rule or behavior was deleted (the row goes with it)
        secret = owner["secret"]
        if row["routed"] == "default":
            default = await alert_store.get_default_route(self.store, row["tenant_id"])
            if default is None:
                await alert_store.abandon(self.store, outbox_id, "not sent: the tenant's default route was removed")
                return
            secret = default["secret"]
        number = row["attempts"] + 1
        try:
            status, error, retryable = await self._send(row, secret)
        except Waiting as exc:
            await alert_store.postpone(self.store, outbox_id, str(exc), time.time() + settings.chat_retry_s())
            return
        if status is not None and 200 <= status < 300 or (status is None and error is None):
            final = "sent"
        elif retryable and number <= settings.MAX_RETRIES:
            final = "pending"
        else:
            final = "failed"
        delay = settings.retry_base_s() * (2 ** (number - 1)) * (0.5 + random.random())
        async with self.store.transaction() as tx:
            await alert_store.record_attempt(tx, outbox_id, number, now_iso(), status, error, final, time.time() + delay)
        if final == "failed":
            log.warning("alert notification %s (%s) failed after %d attempts: %s", outbox_id, row["channel"], number, error or status)

    async def _owner(self, row: Any) -> Any:
        if row["rule_id"]:
            return await alert_store.get_rule(self.store, row["rule_id"])
        return await behavior_store.get(self.store, row["behavior_id"])

    async def _send(self, row: Any, secret: str) -> tuple[int | None, str | None, bool]:
        """(response status, error, retryable); a success by a channel without status is (None, None, _)."""
        payload = alert_store.payload_of(row)
        if row["channel"] in ("webhook", "slack"):
            data = payload if row["channel"] == "webhook" else blocks(row["event"], payload)
            return await self._post(row["destination"], secret, row["event"], row["id"], json.dumps(data).encode())
        if row["channel"] == "email":
            return await self._email(row, payload)
        return await self._chat(row, payload)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers={"User-Agent": "svcd-alerts/1"}, connector=guarded_connector())
        return self._session

    async def _post(self, url: str, secret: str, event: str, delivery_id: str, body: bytes) -> tuple[int | None, str | None, bool]:
        try:
            await check_outbound_url(url)  # at every send: DNS may have changed
        except UnsafeURL as exc:
            return None, f"refused, not sent: {exc}", False
        headers = {"Content-Type": "application/json", "X-Svc-Event": event, "X-Svc-Delivery": delivery_id,
                   "X-Svc-Signature": sign(secret, body)}
        try:
            async with self._http().post(url, data=body, headers=headers, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=settings.timeout_s())) as response:
                await response.read()
                return response.status, None if response.status < 300 else f"HTTP {response.status}", response.status >= 500
        except (asyncio.TimeoutError, aiohttp.ClientError, OSError) as exc:
            # one text whatever the cause (refused, closed, unreachable, timed out): no port-scan oracle;
            # the URL (a chat incoming webhook is a credential) is not in it either
            return None, no_answer(exc, "<url>"), True

    async def _email(self, row: Any, payload: dict[str, Any]) -> tuple[int | None, str | None, bool]:
        subject, text = email_text(row["event"], payload)
        try:
            await send_email(row["destination"], subject, text)
        except EmailUnavailable as exc:
            raise Waiting(str(exc))
        except smtplib.SMTPResponseException as exc:
            return exc.smtp_code, f"SMTP {exc.smtp_code}", 400 <= exc.smtp_code < 500
        except (smtplib.SMTPException, OSError) as exc:
            return None, f"{type(exc).__name__}: {exc}"[:500], True
        return None, None, False

    async def _chat(self, row: Any, payload: dict[str, Any]) -> tuple[int | None, str | None, bool]:
        try:
            notify = importlib.import_module("daemon.chat.notify")
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("daemon.chat"):
                raise Waiting("chat integration not installed")
            raise
        try:
            await notify.post_alert(self.app, row["tenant_id"], row["destination"], {**payload, "event": row["event"]})
        except notify.ChatUnavailable as exc:
            raise Waiting(f"chat unavailable: {exc}"[:500])
        except notify.ChatSendError as exc:
            return None, f"chat: {exc}"[:500], bool(getattr(exc, "retryable", False))
        return None, None, False
