"""`svc alerts ...` and `svc behaviors ...`: the real CLI (a subprocess) against an in-process daemon."""
from __future__ import annotations

import json

from tests.support.procs import svc_cli
from tests.support.receivers import HttpReceiver


async def test_alerts_create_prints_the_rule_and_list_shows_it(api):
    code, out, err = await svc_cli(api, "alerts", "create", "low", "pass_rate < 0.9", "--webhook", "http://127.0.0.1:9/h",
                                   "--eval", "demo")
    created = json.loads(out)
    code, out, err = await svc_cli(api, "alerts", "list", "--eval", "demo")
    assert [r["id"] for r in json.loads(out)["items"]] == [created["id"]]


async def test_alerts_create_with_a_bad_condition_exits_1_naming_the_field(api):
    code, out, err = await svc_cli(api, "alerts", "create", "low", "pass_rate is low", "--webhook", "http://127.0.0.1:9/h")
    assert (code, out, "condition" in err.splitlines()[0]) == (1, "", True)


async def test_alerts_test_sends_to_the_destination_and_exits_0(api):
    receiver = await HttpReceiver().start()
    try:
        _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.9", "notify": "webhook",
                                                     "webhook_url": receiver.url})
        code, out, err = await svc_cli(api, "alerts", "test", rule["id"])
        assert (code, json.loads(out)["delivery"]["status"], len(receiver.calls)) == (0, "sent", 1)
    finally:
        await receiver.stop()


async def test_alerts_test_to_a_failing_destination_exits_1(api):
    receiver = await HttpReceiver((404,)).start()
    try:
        _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.9", "notify": "webhook",
                                                     "webhook_url": receiver.url})
        code, out, err = await svc_cli(api, "alerts", "test", rule["id"])
        assert (code, err.strip()) == (1, "svc: test notification failed: HTTP 404")
    finally:
        await receiver.stop()


async def test_behaviors_create_binary_then_stats(api):
    code, out, err = await svc_cli(api, "behaviors", "create-binary", "leaks", "--baseline", "0.2")
    created = json.loads(out)
    await api.post(f"/v1/behaviors/{created['id']}/verdicts", json={"verdicts": [{"detected": True}, {"detected": False}]})
    code, out, err = await svc_cli(api, "behaviors", "stats", created["id"])
    assert json.loads(out) == {"rate": 0.5, "sample": 2, "breached": False, "baseline_pct": 0.2, "baseline_direction": "above"}


async def test_behaviors_create_classifier_needs_a_judge_or_rule(api):
    code, out, err = await svc_cli(api, "behaviors", "create-classifier", "tone", "--baseline", "0.1")
    assert (code, out) == (1, "")


async def test_alerts_get_prints_the_rule(api):
    _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.9", "notify": "webhook",
                                                 "webhook_url": "http://127.0.0.1:9/h"})
    code, out, err = await svc_cli(api, "alerts", "get", rule["id"])
    assert (code, json.loads(out)["condition"]) == (0, "pass_rate < 0.9")


async def test_alerts_delete_removes_the_rule(api):
    _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.9", "notify": "webhook",
                                                 "webhook_url": "http://127.0.0.1:9/h"})
    code, out, err = await svc_cli(api, "alerts", "delete", rule["id"])
    response, _ = await api.get(f"/v1/alerts/{rule['id']}")
    assert (code, response.status) == (0, 404)


async def test_alerts_deliveries_lists_the_test_notification(api):
    receiver = await HttpReceiver().start()
    try:
        _, rule = await api.post("/v1/alerts", json={"name": "low", "condition": "pass_rate < 0.9", "notify": "webhook",
                                                     "webhook_url": receiver.url})
        await api.post(f"/v1/alerts/{rule['id']}/test")
        code, out, err = await svc_cli(api, "alerts", "deliveries", rule["id"])
        assert (code, [(d["event"], d["status"]) for d in json.loads(out)["items"]]) == (0, [("alert.test", "sent")])
    finally:
        await receiver.stop()


async def test_alerts_default_route_set_then_get(api):
    code, out, err = await svc_cli(api, "alerts", "default-route", "set", "--email", "oncall@example.com")
    assert code == 0, err
    code, out, err = await svc_cli(api, "alerts", "default-route", "get")
    assert (code, json.loads(out)["notify"], json.loads(out)["email_to"]) == (0, "email", "oncall@example.com")


async def test_alerts_default_route_get_without_one_exits_1(api):
    code, out, err = await svc_cli(api, "alerts", "default-route", "get")
    assert (code, out) == (1, "")


async def test_behaviors_create_with_direction_either(api):
    code, out, err = await svc_cli(api, "behaviors", "create-binary", "drifts", "--baseline", "0.3", "--direction", "either")
    assert (code, json.loads(out)["baseline_direction"]) == (0, "either")


async def test_alerts_default_route_delete_removes_it(api):
    await api.put("/v1/alerts/default-route", json={"notify": "email", "email_to": "oncall@example.com"})
    code, out, err = await svc_cli(api, "alerts", "default-route", "delete")
    response, _ = await api.get("/v1/alerts/default-route")
    assert (code, err.strip(), response.status) == (0, "deleted the default route", 404)
