"""client/reports.py on results too large for a pull-request comment: the Markdown is cut to stay
under GitHub's 65,536 characters and says what it cut."""
from __future__ import annotations

from client.reports import MARKDOWN_LIMIT, markdown


def huge_results(n: int) -> dict:
    scenarios = [{"id": f"scn_{i}", "index": i, "matrix_entry": {"case": f"case-{i:05d}-" + "x" * 40}, "verdict": "fail",
                  "status": "fail", "passed": False, "passed_runs": 0, "completed_runs": 3, "pass_rate_ci": [0.0, 0.56],
                  "errors": [], "runs": [{"index": 0, "invariant_results": [{"invariant_id": "ok", "name": "ok", "status": "failed"}]}],
                  "reproducer": {"command": f"svc runs create --spec big --spec-version 1 --seed seed_{i:016x} --wait"}}
                 for i in range(n)]
    return {"id": "exp-big", "name": "big", "status": "completed", "scenarios": scenarios,
            "metrics": {"pass_rate": 0.0, "verdicts": {"fail": n}}}


def test_a_report_of_thousands_of_failures_is_cut_under_the_comment_limit_and_says_so():
    text = markdown(huge_results(3000))
    assert len(text) <= MARKDOWN_LIMIT and "more scenarios cut to stay under GitHub's 65,536-character limit" in text


def test_the_report_says_where_a_runs_time_went_on_average():
    results = huge_results(0)
    results["metrics"].update(total_runs=4, time_budget_ms={"queue_ms": 400, "boot_ms": 4800, "setup_ms": 1200,
                                                            "agent_ms": 10_000, "checks_ms": 800, "teardown_ms": 200})
    assert "Time per run (mean): queue 0.10s · boot 1.20s (setup 0.30s) · agent 2.50s · checks 0.20s · teardown 0.05s" in markdown(results)
