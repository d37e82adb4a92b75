"""Scores in the TUI against a real daemon: the experiment view shows per-rule pass rates, the run view
shows a span's scores (rule, score, reason) and a judge failure as a judge error, not a score."""
from __future__ import annotations

import pytest

from tests.support.openai_server import OpenAIServer, Reply
from tests.support.tui import make_app, screen_text, upload_spec, wait_for
from tests.support.waiting import wait_for as wait_until
from tui.screens.experiment import ExperimentScreen
from tui.screens.run import RunScreen
from tui.widgets.span_tree import SpanTree

TRACE_ID = "trace-scored"


def the_tree(app, screen) -> SpanTree | None:
    found = list(app.screen.query(SpanTree)) if app.screen is screen else []
    return found[0] if found else None


def shown(app, needle: str) -> str | None:
    """The screen's text once it shows `needle`."""
    text = screen_text(app)
    return text if needle in text else None


@pytest.fixture
def failing_judge(monkeypatch):
    with OpenAIServer() as server:
        server.respond = lambda body: Reply(status=500)
        for name, value in (("BASE_URL", server.url), ("API_KEY", "sk-test"), ("MODEL", "m"), ("BACKOFF_S", "0")):
            monkeypatch.setenv(f"SERVICE_JUDGE_{name}", value)
        yield server


@pytest.fixture
async def scored(daemon, api, failing_judge) -> str:
    await upload_spec(api, "demo")
    experiment = await api.post("/v1/experiments", {"spec_id": "demo"})
    events = [{"trace_id": TRACE_ID, "span_id": span, "event_type": "llm_call", "tool": "chat", "experiment_id": experiment["id"],
               "input": "what is six times seven?", "output": output}
              for span, output in (("span_a", "the answer is 42"), ("span_b", "no idea"))]
    await api.post("/v1/traces", {"events": events})
    regex_rule = await api.post("/v1/score-rules", {"name": "says 42", "type": "regex", "pattern": "42"})
    judge_rule = await api.post("/v1/score-rules", {"name": "judged", "type": "llm_judge", "rubric": "Correct?"})
    job = await api.post(f"/v1/experiments/{experiment['id']}/score", {"rule_ids": [regex_rule["id"], judge_rule["id"]]})
    async def completed():
        return (await api.get(f"/v1/score-jobs/{job['job_id']}"))["status"] == "completed"
    await wait_until(completed, what="the scoring job to finish")
    return experiment["id"]


async def test_the_experiment_view_shows_per_rule_pass_rates(daemon, scored):
    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        app.push_screen(ExperimentScreen(scored))
        text = await wait_for(pilot, lambda: shown(app, "says 42"), what="rule pass rates")
        assert "pass 50% of 2" in text and "2 unscored" in text


async def test_the_run_view_shows_a_spans_scores_and_its_judge_error(daemon, scored):
    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = RunScreen(trace_id=TRACE_ID, experiment_id=scored)
        app.push_screen(screen)
        tree = await wait_for(pilot, lambda: the_tree(app, screen), what="run screen")
        await wait_for(pilot, lambda: len(tree.index) == 2 and screen.scores is not None, what="spans and scores")
        tree.reveal("span_b")
        text = await wait_for(pilot, lambda: shown(app, "judge error"), what="span scores")
        assert "says 42: 0.00" in text and "judge error server_error" in text


async def test_the_judge_error_is_painted_in_the_warning_colour_not_a_verdicts(daemon, scored):
    from tui.data.scores import span_scores

    app = make_app(daemon)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = RunScreen(trace_id=TRACE_ID, experiment_id=scored)
        app.push_screen(screen)
        await wait_for(pilot, lambda: screen.scores, what="scores")
        variables = app.get_css_variables()
        text = span_scores(screen.scores, "span_b", variables)
        painted = {text.plain[s.start:s.end].split(" ")[0]: str(s.style) for s in text.spans}
        assert (painted["judge"], painted["0.00"]) == (variables["warning"], variables["error"])
