"""Alert evaluation after real (fake-runner) experiments and delivery through the outbox to real
receivers: an HTTP server answering 500 twice then 200, a real SMTP server, the chat integration."""
from __future__ import annotations

import asyncio

import pytest

from daemon.experiments.groups import COMPLETED_HOOKS_KEY
from daemon.webhooks import verify
from tests.support.experiments import run_experiment, start, upload
from tests.support.receivers import HttpReceiver, SmtpReceiver
from tests.support.specs import spec_yaml
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("SERVICE_ALERT_RETRY_BASE_S", "0.05")


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


@pytest.fixture
async def receivers():
    started: list[HttpReceiver] = []

    async def make(*statuses: int, **options) -> HttpReceiver:
        receiver = await HttpReceiver(statuses, **options).start()
        started.append(receiver)
        return receiver

    yield make
    for receiver in started:
        await receiver.stop()


async def rule(api, url: str, **fields) -> dict:
    body = {"name": "pass rate low", "condition": "pass_rate < 0.8", "notify": "webhook", "webhook_url": url, "eval_id": "demo", **fields}
    response, created = await api.post("/v1/alerts", json=body)
    assert response.status == 201, created
    return created


async def experiment(api, mode: str, name: str = "nightly") -> dict:
    await upload(api, spec_yaml(matrix=[{"mode": mode}], replicas=2))
    return await run_experiment(api, name=name, spec_id="demo")


async def settled(api, rule_id: str, timeout: float = 15.0) -> list[dict]:
    """The rule's notifications once none is pending."""
    async def none_pending():
        _, page = await api.get(f"/v1/alerts/{rule_id}/deliveries")
        items = page["items"]
        return items if items and all(d["status"] != "pending" for d in items) else None
    return await wait_for(none_pending, timeout=timeout, what="no pending delivery")


async def evaluated(api, rule_id: str, timeout: float = 10.0) -> dict:
    async def rule_evaluated():
        _, body = await api.get(f"/v1/alerts/{rule_id}")
        return body if body["state"] != "no_data" else None
    return await wait_for(rule_evaluated, timeout=timeout, what="the rule to be evaluated")


async def test_failing_experiment_is_delivered_once_after_two_500s(api, receivers):
    receiver = await receivers(500, 500)
    created = await rule(api, receiver.url)
    done = await experiment(api, "fail")
    await settled(api, created["id"])
    _, fired = await api.get(f"/v1/alerts/{created['id']}")
    expected = {"rule_id": created["id"], "rule_name": "pass rate low", "reason": "pass_rate 0 < 0.8", "experiment_id": done["id"],
                "experiment_name": "nightly", "fired_at": fired["last_fired_at"], "metric_value": 0.0, "threshold": 0.8}
    assert [(c["status"], c["body"]) for c in receiver.calls] == [(500, expected), (500, expected), (200, expected)]


async def test_retries_carry_one_delivery_id_and_a_valid_signature(api, receivers):
    receiver = await receivers(500, 500)
    created = await rule(api, receiver.url)
    await experiment(api, "fail")
    [delivery] = await settled(api, created["id"])
    assert {c["headers"]["X-Svc-Delivery"] for c in receiver.calls} == {delivery["id"]}
    assert all(verify(created["secret"], c["headers"]["X-Svc-Signature"], c["raw"]) for c in receiver.calls)


async def test_delivery_log_lists_every_attempt(api, receivers):
    receiver = await receivers(500, 500)
    created = await rule(api, receiver.url)
    await experiment(api, "fail")
    [delivery] = await settled(api, created["id"])
    assert (delivery["status"], [a["response_status"] for a in delivery["attempt_log"]]) == ("sent", [500, 500, 200])


async def test_a_destination_failing_every_attempt_stops_after_three_retries(api, receivers):
    receiver = await receivers(500, 500, 500, 500, 500)
    created = await rule(api, receiver.url)
    await experiment(api, "fail")
    [delivery] = await settled(api, created["id"])
    assert (delivery["status"], delivery["attempts"], len(receiver.calls)) == ("failed", 4, 4)


async def test_passing_experiment_sends_nothing_and_the_rule_is_ok(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url)
    await experiment(api, "pass")
    state = (await evaluated(api, created["id"]))["state"]
    _, page = await api.get(f"/v1/alerts/{created['id']}/deliveries")
    assert (state, page["items"], receiver.calls) == ("ok", [], [])


async def test_firing_rule_shows_state_firing(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url)
    await experiment(api, "fail")
    assert (await evaluated(api, created["id"]))["state"] == "firing"


async def test_deleted_rule_sends_nothing(api, receivers):
    deleted_receiver, canary_receiver = await receivers(), await receivers()
    deleted = await rule(api, deleted_receiver.url, name="deleted")
    canary = await rule(api, canary_receiver.url, name="canary")
    await api.delete(f"/v1/alerts/{deleted['id']}")
    await experiment(api, "fail")
    await settled(api, canary["id"])
    assert deleted_receiver.calls == [] and len(canary_receiver.calls) == 1


async def test_a_rule_deleted_while_its_notification_is_pending_sends_nothing_more(api, receivers):
    receiver = await receivers(500, 500, 500, hold=True)
    created = await rule(api, receiver.url)
    await experiment(api, "fail")
    await asyncio.wait_for(receiver.arrived.wait(), 10)  # the first attempt is in flight; retries would follow
    response, _ = await api.delete(f"/v1/alerts/{created['id']}")
    receiver.release()
    await asyncio.sleep(0.5)  # several retry delays (0.05 s base)
    assert (response.status, len(receiver.calls)) == (204, 1)


async def test_rule_of_another_spec_is_not_evaluated(api, receivers):
    receiver = await receivers()
    other = await rule(api, receiver.url, eval_id="another-spec")
    canary = await rule(api, (await receivers()).url, name="canary")
    await experiment(api, "fail")
    await settled(api, canary["id"])
    assert (await api.get(f"/v1/alerts/{other['id']}"))[1]["state"] == "no_data" and receiver.calls == []


async def test_the_same_experiment_fires_a_rule_once_within_five_minutes(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url)
    done = await experiment(api, "fail")
    await settled(api, created["id"])
    for hook in api.app[COMPLETED_HOOKS_KEY]:  # what a restart's recovery does: the hooks run again
        await hook(api.app, done["id"], "completed")
    await asyncio.sleep(0.3)
    _, page = await api.get(f"/v1/alerts/{created['id']}/deliveries")
    assert (page["count"], len(receiver.calls)) == (1, 1)


async def test_last_n_runs_window_has_no_data_until_n_experiments(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url, window="last_2_runs")
    await experiment(api, "fail", "first")
    state = (await api.get(f"/v1/alerts/{created['id']}"))[1]["state"]
    assert (state, receiver.calls) == ("no_data", [])


async def test_last_n_runs_window_fires_when_all_n_crossed(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url, window="last_2_runs")
    await experiment(api, "fail", "first")
    second = await experiment(api, "fail", "second")
    await settled(api, created["id"])
    assert [c["body"]["experiment_id"] for c in receiver.calls] == [second["id"]]


async def test_last_n_runs_window_stays_ok_when_one_passed(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url, window="last_2_runs")
    await experiment(api, "pass", "first")
    await experiment(api, "fail", "second")
    state = (await evaluated(api, created["id"]))["state"]
    assert (state, receiver.calls) == ("ok", [])


async def test_last_24h_window_evaluates_the_runs_of_the_period(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url, condition="pass_rate <= 0.5", window="last_24h")
    await experiment(api, "pass", "first")
    await experiment(api, "fail", "second")
    await settled(api, created["id"])
    assert [c["body"]["metric_value"] for c in receiver.calls] == [0.5]


async def test_email_rule_reaches_the_smtp_server(api, monkeypatch):
    smtp = SmtpReceiver().start()
    try:
        monkeypatch.setenv("SERVICE_SMTP_URL", smtp.url)
        created = await rule(api, None, notify="email", email_to="oncall@example.com", webhook_url=None)
        await experiment(api, "fail")
        await settled(api, created["id"])
        [mail] = smtp.messages
        assert (mail["to"], mail["message"]["Subject"]) == (["oncall@example.com"], "[svc] Alert fired: pass rate low - pass_rate 0 < 0.8")
    finally:
        smtp.stop()


async def test_email_waits_while_no_smtp_server_is_configured(api, monkeypatch):
    monkeypatch.delenv("SERVICE_SMTP_URL", raising=False)
    created = await rule(api, None, notify="email", email_to="oncall@example.com", webhook_url=None)
    await experiment(api, "fail")
    delivery = await first_error(api, created["id"])
    assert (delivery["status"], delivery["attempts"], delivery["last_error"]) == (
        "pending", 0, "no SMTP server configured (SERVICE_SMTP_URL)")


async def first_error(api, rule_id: str, timeout: float = 10.0) -> dict:
    async def errored():
        _, page = await api.get(f"/v1/alerts/{rule_id}/deliveries")
        return page["items"][0] if page["items"] and page["items"][0]["last_error"] else None
    return await wait_for(errored, timeout=timeout, what="a delivery error to be recorded")


async def test_chat_rule_is_kept_pending_while_chat_is_not_installed(api):
    created = await rule(api, None, notify="chat", slack_channel="#evals", webhook_url=None)
    await experiment(api, "fail")
    delivery = await first_error(api, created["id"])
    assert (delivery["status"], delivery["attempts"], delivery["last_error"].startswith("chat unavailable")) == ("pending", 0, True)


async def test_test_endpoint_sends_a_sample_notification(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url)
    response, body = await api.post(f"/v1/alerts/{created['id']}/test")
    assert (response.status, body["delivery"]["status"], receiver.calls[0]["headers"]["X-Svc-Event"]) == (202, "sent", "alert.test")


async def test_a_rotated_secret_signs_the_next_notification(api, receivers):
    receiver = await receivers()
    created = await rule(api, receiver.url)
    response, rotated = await api.post(f"/v1/alerts/{created['id']}/secret")
    await api.post(f"/v1/alerts/{created['id']}/test")
    [call] = receiver.calls
    assert (response.status, verify(rotated["secret"], call["headers"]["X-Svc-Signature"], call["raw"]),
            verify(created["secret"], call["headers"]["X-Svc-Signature"], call["raw"])) == (200, True, False)
