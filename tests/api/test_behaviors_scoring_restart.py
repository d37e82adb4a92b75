"""A real svcd SIGKILLed in the middle of a scoring job whose rule feeds a behavior: after the restart
the job finishes and the behavior holds exactly one verdict per span (none lost, none repeated)."""
from __future__ import annotations

import signal
import sqlite3

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


async def test_a_daemon_killed_mid_job_leaves_one_verdict_per_span():
    with OpenAIServer() as llm, short_dir("svc-bv-") as home:
        llm.respond = lambda body: Reply(content='{"score": 0.8, "reason": "fine"}', delay_s=0.02)
        daemon = JudgedSvcd(home, llm.url)
        await daemon.start()
        try:
            await daemon.request("POST", "/v1/specs", {"name": "demo", "yaml": spec_yaml("demo")})
            status, experiment = await daemon.request("POST", "/v1/experiments", {"spec_id": "demo"})
            assert status == 201, experiment
            events = [{"event_type": "llm_call", "experiment_id": experiment["id"], "input": f"q{i}", "output": f"answer {i}"}
                      for i in range(SPANS)]
            status, ingested = await daemon.request("POST", "/v1/traces", {"events": events})
            assert ingested["accepted"] == SPANS, ingested
            status, rule = await daemon.request("POST", "/v1/score-rules", {"name": "ok", "type": "llm_judge", "rubric": "Is it fine?"})
            status, behavior = await daemon.request("POST", "/v1/behaviors", {"name": "fine", "kind": "binary", "rule_id": rule["id"],
                                                                              "baseline_pct": 0.5, "baseline_direction": "above"})
            assert status == 201, behavior
            status, accepted = await daemon.request("POST", f"/v1/experiments/{experiment['id']}/score", {"rule_ids": [rule["id"]]})
            await poll_job(daemon, accepted["job_id"], lambda job: job["done"] >= 500)
            daemon.kill(signal.SIGKILL)
            await daemon.start()
            job = await poll_job(daemon, accepted["job_id"], lambda job: job["status"] in ("completed", "failed"))
            status, stats = await daemon.request("GET", f"/v1/behaviors/{behavior['id']}/stats")
        finally:
            if daemon.proc is not None and daemon.proc.poll() is None:
                daemon.kill(signal.SIGTERM)
        with sqlite3.connect(home / "svc.db") as db:
            verdicts, spans = db.execute("SELECT COUNT(*), COUNT(DISTINCT span_id) FROM behavior_verdicts WHERE behavior_id = ?",
                                         (behavior["id"],)).fetchone()
        assert (job["status"], verdicts, spans, stats["breached"]) == ("completed", SPANS, SPANS, True)
