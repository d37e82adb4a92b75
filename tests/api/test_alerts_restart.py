"""A real svcd SIGKILLed after a behavior's breach was decided (its outbox row committed):
- before anything reached the destination: the next daemon delivers it, and the receiver sees
  exactly one delivery;
- during the send (the receiver has the request, unanswered): the next daemon sends it again under
  the same delivery id, which is what a receiver deduplicates on.
Either way the breach is queued once and never re-decided."""
from __future__ import annotations

import asyncio
import signal

import pytest

from tests.support.alert_svcd import FastRetrySvcd, all_sent
from tests.support.homes import short_dir
from tests.support.procs import SvcdProcess
from tests.support.receivers import HttpReceiver, SmtpReceiver, free_port


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


async def breached_behavior(svcd: SvcdProcess, **routing) -> dict:
    status, created = await svcd.request("POST", "/v1/behaviors", {
        "name": "leaks", "kind": "binary", "baseline_pct": 0.2, "baseline_direction": "above", **routing})
    assert status == 201, created
    status, body = await svcd.request("POST", f"/v1/behaviors/{created['id']}/verdicts", {"verdicts": [{"detected": True}] * 20})
    assert (status, body["stats"]["breached"]) == (201, True), body
    return created


async def first_notice(svcd: SvcdProcess, behavior_id: str, ready, timeout: float = 30) -> dict:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        _, page = await svcd.request("GET", f"/v1/behaviors/{behavior_id}/deliveries")
        if page["items"] and ready(page["items"][0]):
            return page["items"][0]
        assert loop.time() < deadline, page
        await asyncio.sleep(0.05)


async def test_a_notice_decided_but_not_yet_sent_when_killed_reaches_the_receiver_exactly_once():
    # The destination is not listening when the breach is decided: the first attempt is refused, the
    # next is 1-3 s away. The daemon is killed in between; the receiver comes up; the next daemon sends.
    receiver = HttpReceiver(port=free_port())
    settings = {"SERVICE_ALERT_RETRY_BASE_S": "2"}
    with short_dir() as home:
        svcd = SvcdProcess(home, settings)
        await svcd.start()
        try:
            created = await breached_behavior(svcd, notify="webhook", webhook_url=f"http://127.0.0.1:{receiver.port}/hook")
            await first_notice(svcd, created["id"], lambda d: d["attempts"] == 1 and d["status"] == "pending")
            svcd.kill(signal.SIGKILL)
            await receiver.start()
            svcd = SvcdProcess(home, settings)
            await svcd.start()
            [delivery] = await all_sent(svcd, f"/v1/behaviors/{created['id']}/deliveries", timeout=30)
            await svcd.request("POST", f"/v1/behaviors/{created['id']}/verdicts", {"verdicts": [{"detected": True}] * 5})
            await asyncio.sleep(0.5)
            assert [(c["headers"]["X-Svc-Delivery"], c["headers"]["X-Svc-Event"], c["body"]["rule_id"]) for c in receiver.calls] == [
                (delivery["id"], "behavior.breached", created["id"])]
        finally:
            if svcd.proc and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)
            await receiver.stop()


async def test_an_email_notice_queued_before_a_sigkill_is_mailed_once_after_restart():
    # No SMTP server configured: the notice is decided and queued, no attempt is made (nothing sent).
    smtp = SmtpReceiver().start()
    waiting = {"SERVICE_ALERT_CHAT_RETRY_S": "0.2"}
    with short_dir() as home:
        svcd = SvcdProcess(home, waiting)
        await svcd.start()
        try:
            created = await breached_behavior(svcd, notify="email", email_to="oncall@example.com")
            queued = await first_notice(svcd, created["id"], lambda d: d["last_error"] is not None)
            svcd.kill(signal.SIGKILL)
            svcd = SvcdProcess(home, {**waiting, "SERVICE_SMTP_URL": smtp.url})
            await svcd.start()
            await all_sent(svcd, f"/v1/behaviors/{created['id']}/deliveries", timeout=30)
            await asyncio.sleep(0.5)
            assert ((queued["status"], queued["attempts"]), [(m["to"], " ".join(m["message"]["Subject"].split())) for m in smtp.messages]) == (
                ("pending", 0), [(["oncall@example.com"], "[svc] Behavior breached: leaks - detection rate 1 above baseline 0.2 over the last 50 verdicts")])
        finally:
            if svcd.proc and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)
            smtp.stop()
