"""Python score rules in a real throw-away sandbox of the stock python image: one sandbox per scoring
job, spans as JSON lines on stdin, one {span_id, score, passed, reason} line per span on stdout; a
crash or a bad line is a rule_error row, never a score; the command never runs on the host."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.scores import add_llm_spans, create_rule, score
from tests.support.specs import spec_yaml
from daemon.appkeys import STORE

pytestmark = [pytest.mark.docker, pytest.mark.asyncio(loop_scope="module")]

SCORER = ("python3 -c 'import sys, json\n"
          "for line in sys.stdin:\n"
          "    span = json.loads(line)\n"
          "    hit = \"42\" in (span[\"output\"] or \"\")\n"
          "    print(json.dumps({\"span_id\": span[\"span_id\"], \"score\": 1.0 if hit else 0.0, \"reason\": \"looked for 42\"}))'")
MARKER = Path(f"/tmp/svc-score-marker-{uuid.uuid4().hex}")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def job(api):
    """One scoring job with three python rules over three llm_call spans."""
    await api.upload_yaml(spec_yaml("pyscore"))
    response, experiment = await api.post("/v1/experiments", json={"spec_id": "pyscore"})
    assert response.status == 201, experiment
    await add_llm_spans(api, experiment["id"], ["the answer is 42", "no idea", "42!"])
    rules = {
        "good": await create_rule(api, name="good", type="python", command=SCORER, threshold=0.5),
        "crash": await create_rule(api, name="crash", type="python", command="echo boom >&2; exit 3"),
        "garbage": await create_rule(api, name="garbage", type="python", command=f"touch {MARKER}; echo not-json"),
    }
    finished = await score(api, experiment["id"], [r["id"] for r in rules.values()])
    assert finished["status"] == "completed", finished
    response, scores = await api.get(f"/v1/scores?experiment_id={experiment['id']}")
    return {"job": finished, "rules": rules, "rows": scores["items"], "experiment_id": experiment["id"]}


def rows_of(job, name):
    return [r for r in job["rows"] if r["rule_id"] == job["rules"][name]["id"]]


async def test_a_python_rule_scores_each_span_from_its_output_line(job):
    assert sorted((r["span_id"], r["score"], r["passed"]) for r in rows_of(job, "good")) == [
        ("span_llm_0", 1.0, True), ("span_llm_1", 0.0, False), ("span_llm_2", 1.0, True)]


async def test_a_crashing_command_is_a_rule_error_never_a_score(job):
    rows = rows_of(job, "crash")
    assert {(r["score"], r["judge_error"]["code"]) for r in rows} == {(None, "rule_error")} and "code 3" in rows[0]["judge_error"]["message"]


async def test_a_bad_output_line_is_a_rule_error(job):
    assert {(r["score"], r["judge_error"]["code"]) for r in rows_of(job, "garbage")} == {(None, "rule_error")}


async def test_the_command_runs_in_the_sandbox_not_on_the_host(job):
    assert not MARKER.exists()


async def test_one_sandbox_per_job_destroyed_at_its_end(api, job):
    rows = await api.app[STORE].fetchall("SELECT state, metadata FROM sandboxes")
    mine = [r["state"] for r in rows if job["job"]["id"] in (r["metadata"] or "")]
    assert mine == ["stopped"]
