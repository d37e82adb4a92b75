"""A real svcd whose experiment (real sandboxes) fires an alert rule, SIGKILLed
- while the webhook notification is in flight: the restarted daemon sends it again under the same
  delivery id and body, and the experiment's rule is never queued twice;
- after the evaluation and before the notification reached anyone: the receiver gets it exactly once."""
from __future__ import annotations

import asyncio
import signal

import pytest
import yaml

from tests.support.alert_svcd import FastRetrySvcd, all_sent
from tests.support.homes import short_dir
from tests.support.procs import SvcdProcess
from tests.support.receivers import HttpReceiver, free_port
from tests.support.specs import tiny_spec

pytestmark = pytest.mark.docker


async def test_alert_interrupted_by_sigkill_is_delivered_once_more_under_the_same_id(stock_images):
    held = await HttpReceiver(hold=True).start()
    with short_dir() as home:
        svcd = FastRetrySvcd(home)
        await svcd.start()
        try:
            doc = tiny_spec("alerted", replicas=1, matrix=[{"mode": "bad"}])
            status, body = await svcd.request("POST", "/v1/specs", {"name": "alerted", "yaml": yaml.safe_dump(doc)})
            assert status == 201, body
            status, rule = await svcd.request("POST", "/v1/alerts", {
                "name": "broken", "condition": "pass_rate < 0.5", "notify": "webhook", "webhook_url": held.url, "eval_id": "alerted"})
            assert status == 201, rule
            status, experiment = await svcd.request("POST", "/v1/experiments", {"name": "nightly", "spec_id": "alerted"})
            assert status == 201, experiment
            await svcd.request("POST", f"/v1/experiments/{experiment['id']}/run")
            await asyncio.wait_for(held.arrived.wait(), 180)  # evaluated, queued, the send under way
            svcd.kill(signal.SIGKILL)
            held.release()
            await svcd.start()
            [delivery] = await all_sent(svcd, f"/v1/alerts/{rule['id']}/deliveries", timeout=60)
            await asyncio.sleep(0.5)
            assert ([c["headers"]["X-Svc-Delivery"] for c in held.calls], held.calls[0]["body"]["experiment_id"],
                    held.calls[0]["body"] == held.calls[1]["body"]) == ([delivery["id"]] * 2, experiment["id"], True)
        finally:
            if svcd.proc and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)
            await held.stop()


async def test_alert_decided_before_a_sigkill_and_not_yet_received_arrives_exactly_once(stock_images):
    # The destination is not listening when the experiment's rule fires: the first attempt is refused
    # and the next is 1-3 s away. The daemon is SIGKILLed in between; the receiver comes up; the next
    # daemon sends it, once.
    receiver = HttpReceiver(port=free_port())
    settings = {"SERVICE_ALERT_RETRY_BASE_S": "2"}
    with short_dir() as home:
        svcd = SvcdProcess(home, settings)
        await svcd.start()
        try:
            doc = tiny_spec("alerted", replicas=1, matrix=[{"mode": "bad"}])
            status, body = await svcd.request("POST", "/v1/specs", {"name": "alerted", "yaml": yaml.safe_dump(doc)})
            assert status == 201, body
            status, rule = await svcd.request("POST", "/v1/alerts", {
                "name": "broken", "condition": "pass_rate < 0.5", "notify": "webhook", "eval_id": "alerted",
                "webhook_url": f"http://127.0.0.1:{receiver.port}/hook"})
            assert status == 201, rule
            status, experiment = await svcd.request("POST", "/v1/experiments", {"name": "nightly", "spec_id": "alerted"})
            assert status == 201, experiment
            await svcd.request("POST", f"/v1/experiments/{experiment['id']}/run")
            await refused_once(svcd, rule["id"])
            svcd.kill(signal.SIGKILL)
            await receiver.start()
            svcd = SvcdProcess(home, settings)
            await svcd.start()
            [delivery] = await all_sent(svcd, f"/v1/alerts/{rule['id']}/deliveries", timeout=60)
            await asyncio.sleep(0.5)
            assert [(c["headers"]["X-Svc-Delivery"], c["body"]["experiment_id"], c["body"]["rule_id"]) for c in receiver.calls] == [
                (delivery["id"], experiment["id"], rule["id"])]
        finally:
            if svcd.proc and svcd.proc.poll() is None:
                svcd.kill(signal.SIGTERM)
            await receiver.stop()


async def refused_once(svcd: SvcdProcess, rule_id: str, timeout: float = 180) -> None:
    """Wait for the rule's notification to have one (refused) attempt and still be pending."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        _, page = await svcd.request("GET", f"/v1/alerts/{rule_id}/deliveries")
        if page["items"] and page["items"][0]["attempts"] == 1 and page["items"][0]["status"] == "pending":
            return
        assert loop.time() < deadline, page
        await asyncio.sleep(0.05)
