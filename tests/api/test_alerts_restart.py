"""A real svcd SIGKILLed between a behavior's breach (its outbox row committed) and the answer to
the send: the next daemon sends the notice again under the same delivery id; the breach is queued
once and never re-decided."""
from __future__ import annotations

import asyncio
import signal

import pytest

from tests.support.alert_svcd import FastRetrySvcd, all_sent
from tests.support.homes import short_dir
from tests.support.receivers import HttpReceiver


@pytest.fixture
async def held():
    receiver = await HttpReceiver(hold=True).start()
    yield receiver
    await receiver.stop()


async def test_a_notice_interrupted_by_sigkill_is_sent_after_restart_under_the_same_id(held):
    with short_dir() as home:
        svcd = FastRetrySvcd(home)
        await svcd.start()
        try:
            status, created = await svcd.request("POST", "/v1/behaviors", {
                "name": "leaks", "kind": "binary", "baseline_pct": 0.2, "baseline_direction": "above",
                "notify": "webhook", "webhook_url": held.url})
            assert status == 201, created
            status, body = await svcd.request("POST", f"/v1/behaviors/{created['id']}/verdicts",
                                              {"verdicts": [{"detected": True}] * 20})
            assert status == 201, body
            await asyncio.wait_for(held.arrived.wait(), 30)  # the send is under way, unanswered
            svcd.kill(signal.SIGKILL)
            held.release()
            await svcd.start()
            [delivery] = await all_sent(svcd, f"/v1/behaviors/{created['id']}/deliveries", timeout=30)
            status, again = await svcd.request("POST", f"/v1/behaviors/{created['id']}/verdicts",
                                               {"verdicts": [{"detected": True}] * 5})
            await asyncio.sleep(0.5)
            ids = [c["headers"]["X-Svc-Delivery"] for c in held.calls]
            assert (ids, held.calls[0]["body"] == held.calls[1]["body"], again["stats"]["breached"]) == (
                [delivery["id"], delivery["id"]], True, True)
        finally:
            if svcd.proc and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)
