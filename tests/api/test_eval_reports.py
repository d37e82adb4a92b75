"""Reports CI reads, written by the real `svc` CLI (a subprocess) from a real daemon's experiment
(pass, fail, flaky and error scenarios, the deterministic scenario runner of tests/support/experiments.py):
JUnit XML validated against the JUnit schema with xmlschema, Markdown rendered by markdown-it-py with
GFM tables, and the HTML loaded from disk in headless Chromium."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.support.experiments import base_seed_for, start
from tests.support.procs import svc_cli
from tests.support.specs import spec_yaml

ROOT = Path(__file__).resolve().parents[2]
XSD = ROOT / "tests" / "support" / "junit.xsd"
MATRIX = [{"mode": "pass"}, {"mode": "fail"}, {"mode": "odd"}, {"mode": "error"}]


@pytest.fixture
async def api(aiohttp_client, tmp_path, runner):
    return await start(aiohttp_client, tmp_path / "home", runner)


@pytest.fixture
async def reported(api, tmp_path):
    """`svc eval run --junit --markdown --html` over four scenarios: pass, fail, flaky (replicas 2/3
    passed: odd seed on the middle one) and error."""
    spec = tmp_path / "mixed.yaml"
    spec.write_text(spec_yaml("mixed", matrix=MATRIX, replicas=3))
    out = tmp_path / "reports"
    code, stdout, err = await svc_cli(api, "eval", "run", str(spec), "--poll", "50ms", "--seed", base_seed_for([False, True, False], 2),
                                      "--junit", str(out / "junit.xml"), "--markdown", str(out / "report.md"),
                                      "--html", str(out / "report.html"), cwd=ROOT, home=tmp_path, timeout=120)
    assert code == 1, err  # a scenario failed
    return json.loads(stdout), out


async def test_the_junit_report_of_a_mixed_experiment_is_valid_junit(reported):
    import xmlschema

    results, out = reported
    assert [s["verdict"] for s in results["scenarios"]] == ["pass", "fail", "flaky", "error"]
    xmlschema.XMLSchema(str(XSD)).validate(str(out / "junit.xml"))
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["1: mode=fail"].find("failure").get("message").startswith("fail: 0/3 passed") and "failed: ok" in \
        cases["1: mode=fail"].find("failure").get("message")
    assert "image localhost/nope:1 not found" in cases["3: mode=error"].find("error").get("message")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["flaky: 2: mode=odd"].startswith("2/3 passed, 95% Wilson interval [")
    assert "reproduce: svc runs create" in cases["1: mode=fail"].find("system-out").text


async def test_the_markdown_report_renders_its_tables_under_the_comment_limit(reported):
    from markdown_it import MarkdownIt

    results, out = reported
    text = (out / "report.md").read_text()
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables = [t for t in tokens if t.type == "table_open"]
    assert len(text) < 65_536 and len(tables) == 2 and "2: mode=odd" in text and "svc runs create" in text


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")) and not os.environ.get("CI"),
                    reason="needs Debian's chromium package (.ci/run installs it; in CI its absence fails)")
def test_the_html_report_opens_from_disk_in_headless_chromium(reported, tmp_path):
    results, out = reported
    page = (out / "report.html").read_text()
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page  # nothing to fetch
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}",
                           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom", (out / "report.html").as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    summary = ET.fromstring(dom[dom.index('<p id="summary">'):dom.index("</p>", dom.index('<p id="summary">')) + 4]).text
    errors = dom[dom.index('<div id="errors">'):dom.index("</div>", dom.index('<div id="errors">'))]
    assert console == [] and errors == '<div id="errors">'
    assert "4 scenarios" in summary and '<tr class="inv failed"><td>ok</td><td class="fail">failed</td>' in dom


async def test_eval_report_and_compare_write_reports_of_finished_experiments(api, reported, tmp_path):
    results, out = reported
    code, _, err = await svc_cli(api, "eval", "report", results["id"], "--junit", str(tmp_path / "again.xml"), cwd=ROOT, home=tmp_path)
    assert code == 0, err
    code, stdout, err = await svc_cli(api, "eval", "compare", results["id"], results["id"], "--markdown", str(tmp_path / "cmp.md"),
                                      cwd=ROOT, home=tmp_path)
    text = (tmp_path / "cmp.md").read_text()
    assert (tmp_path / "again.xml").read_bytes().count(b"<testcase ") == 4
    assert code == 0 and "| pass_rate | 0.417 | 0.417 | +0 | no_change | 1 | [+0, +0] |" in text and "gate: **no_change**" in text


# --- the comparison's effects section (daemon/effects): agent-made paths, hosts and commands as text ---------

HOSTILE = "/workspace/<script>alert(1)</script>|[x](http://evil.test)`.txt"
EFFECTS_COMPARISON = {
    "baseline_id": "exp-base", "candidate_id": "exp-cand", "decision": "no_change", "reason": "", "metrics": [],
    "regressions": [], "changed_scenarios": [], "quarantined": [], "baseline_source": "experiment",
    "effects": [
        {"matrix_entry": {"mode": "pass"}, "baseline_runs": ["run_b1"], "candidate_runs": ["run_c1"], "differences": [
            {"kind": "db", "key": "db orders insert", "side": "between", "baseline": [None], "candidate": [1],
             "message": "candidate inserted 1 row into orders (baseline none)"},
            {"kind": "file", "key": f"file {HOSTILE}", "side": "between", "baseline": [None], "candidate": ["added"],
             "message": f"candidate added {HOSTILE} (baseline unchanged)"}]},
        {"matrix_entry": {"mode": "odd"}, "baseline_runs": ["run_b2", "run_b3"], "candidate_runs": ["run_c2"], "differences": [
            {"kind": "http", "key": "http POST api.example.test/v1/refunds", "side": "baseline", "baseline": [1, 2],
             "candidate": [1], "message": "the baseline's 2 replicas differ on POST api.example.test/v1/refunds (http): 1, 2"}]},
    ],
}
EFFECTS_RESULTS = {"id": "exp-cand", "name": "candidate", "spec_id": "mixed", "spec_version": 1, "status": "completed",
                   "scenarios": [], "metrics": {"verdicts": {}}}


def test_the_markdown_report_names_the_effects_that_differ_per_scenario_as_text():
    from markdown_it import MarkdownIt

    from client.reports import markdown

    text = markdown(EFFECTS_RESULTS, EFFECTS_COMPARISON)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    cells = [t.children for t in tokens if t.type == "inline" and t.children is not None]
    assert not [c for kids in cells for c in kids if c.type in ("html_inline", "link_open", "image")]  # no HTML, no link
    rows = [line for line in text.splitlines() if line.startswith("| `mode=")]
    assert "### Effects that differ" in text and len(rows) == 3
    assert rows[0] == "| `mode=pass` | between the experiments | candidate inserted 1 row into orders (baseline none) |"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;\\|\\[x\\](http://evil.test)'.txt" in rows[1]
    assert rows[2].startswith("| `mode=odd` | between the baseline's replicas | the baseline's 2 replicas differ on POST")
    none = markdown(EFFECTS_RESULTS, {**EFFECTS_COMPARISON, "effects": []})
    assert "### Effects\n\n_no effect (db writes, HTTP and model calls, files, processes) differs" in none
    bundle = markdown(EFFECTS_RESULTS, {**EFFECTS_COMPARISON, "effects": [], "baseline_source": "bundle"})
    assert "_not compared: the baseline is a bundle" in bundle
    older = {k: v for k, v in EFFECTS_COMPARISON.items() if k != "effects"}  # an svcd before the effect ledger
    assert "Effects" not in markdown(EFFECTS_RESULTS, older)


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")) and not os.environ.get("CI"),
                    reason="needs Debian's chromium package (.ci/run installs it; in CI its absence fails)")
def test_the_html_report_shows_the_effects_that_differ_as_text_in_headless_chromium(tmp_path):
    from client.reports import html

    page = tmp_path / "report.html"
    page.write_text(html(EFFECTS_RESULTS, {}, EFFECTS_COMPARISON))
    assert "<script>alert(1)" not in page.read_text()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}",
                           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    errors = dom[dom.index('<div id="errors">'):dom.index("</div>", dom.index('<div id="errors">'))]
    assert errors == '<div id="errors">' and not [line for line in proc.stderr.splitlines() if "Uncaught" in line]
    section = dom[dom.index('<div id="effects">'):dom.index("</table>", dom.index('<div id="effects">'))]
    assert section.count('<tr class="effect between">') == 2 and section.count('<tr class="effect replicas">') == 1
    assert ("<td>mode=pass</td><td>between the experiments</td><td>candidate inserted 1 row into orders (baseline none)</td>"
            in section)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|[x](http://evil.test)`.txt" in section  # the path as typed, as text
    assert "<script>alert" not in dom
