"""A real svcd SIGKILLed in the middle of a scoring job: the restarted daemon finishes the job, and no
(span, rule) pair of the job has two rows."""
from __future__ import annotations

import signal

from tests.support.homes import short_dir
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.scores import JudgedSvcd
from tests.support.specs import spec_yaml
from tests.support.waiting import wait_for

SPANS = 1200  # three batches of the job: the kill lands after the first


async def poll_job(daemon: JudgedSvcd, job_id: str, until) -> dict:
    async def reached():
        status, job = await daemon.request("GET", f"/v1/score-jobs/{job_id}")
        assert status == 200, job
        return job if until(job) else None
    return await wait_for(reached, timeout=120, what=f"score job {job_id}")


async def all_rows(daemon: JudgedSvcd, experiment_id: str) -> list[dict]:
    rows, cursor = [], ""
    while True:
        status, page = await daemon.request("GET", f"/v1/scores?experiment_id={experiment_id}&all=true&limit=1000&cursor={cursor}")
        assert status == 200, page
        rows += page["items"]
        if not page["next_cursor"]:
            return rows
        cursor = page["next_cursor"]


async def test_a_daemon_killed_mid_job_finishes_it_without_duplicate_rows():
    with OpenAIServer() as llm, short_dir("svc-sr-") as home:
        llm.respond = lambda body: Reply(content='{"score": 0.8, "reason": "fine"}', delay_s=0.02)
        daemon = JudgedSvcd(home, llm.url)
        await daemon.start()
        try:
            status, _ = await daemon.request("POST", "/v1/specs", {"name": "demo", "yaml": spec_yaml("demo")})
            status, experiment = await daemon.request("POST", "/v1/experiments", {"spec_id": "demo"})
            assert status == 201, experiment
            events = [{"event_type": "llm_call", "experiment_id": experiment["id"], "input": f"q{i}", "output": f"answer {i}"}
                      for i in range(SPANS)]
            status, ingested = await daemon.request("POST", "/v1/traces", {"events": events})
            assert ingested["accepted"] == SPANS, ingested
            status, rule = await daemon.request("POST", "/v1/score-rules", {"name": "ok", "type": "llm_judge", "rubric": "Is it fine?"})
            status, accepted = await daemon.request("POST", f"/v1/experiments/{experiment['id']}/score", {"rule_ids": [rule["id"]]})
            assert status == 202, accepted
            at_kill = await poll_job(daemon, accepted["job_id"], lambda job: job["done"] >= 500)
            daemon.kill(signal.SIGKILL)
            assert at_kill["done"] < SPANS
            await daemon.start()
            job = await poll_job(daemon, accepted["job_id"], lambda job: job["status"] in ("completed", "failed"))
            rows = await all_rows(daemon, experiment["id"])
            assert (job["status"], job["done"], len(rows), len({r["span_id"] for r in rows})) == ("completed", SPANS, SPANS, SPANS)
        finally:
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.kill(signal.SIGTERM)
