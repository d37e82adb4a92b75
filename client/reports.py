"""Reports a CI system reads, built from RunResults (and a comparison): JUnit XML, Markdown, HTML.

- :func:`junit` — one ``testsuite`` per experiment, one ``testcase`` per scenario (its matrix entry
  or dataset record in the name); ``failure`` with the failed invariants and their evidence,
  ``error`` for an ``error`` verdict, ``skipped`` for a scenario that never finished; a flaky
  scenario is marked by a suite property ``flaky: <name>`` (passed/total and the Wilson interval;
  the schema Jenkins and GitLab read has no properties on a testcase); the reproducer and the
  retried attempts in ``system-out``.
- :func:`markdown` — for ``$GITHUB_STEP_SUMMARY`` and PR comments: the verdict line, the metric
  deltas table, regressions, scenarios whose verdict flipped, the effects that differ (between the
  experiments' runs, or between one side's replicas), flaky ones and reproducers; kept
  under :data:`MARKDOWN_LIMIT` characters (GitHub's comment limit), saying what was cut.
- :func:`html` — one self-contained file (data and script inline, nothing fetched) with the
  experiment, its scenarios, each run's invariants, audit events and trace tree, filterable; with a
  comparison, its metrics and the effects that differ per scenario.

The functions are pure; :func:`gather_details` fetches what the HTML shows beyond RunResults.
"""
from __future__ import annotations

import json
import re
import socket
from typing import Any
from xml.etree import ElementTree as ET

from client.time_budget import budget_line

MARKDOWN_LIMIT = 65_536
DETAIL_RUNS = 200  # runs whose audit events and traces an HTML report embeds


def entry_label(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "(no matrix)"
    return ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v, sort_keys=True)}" for k, v in entry.items())


def scenario_name(scenario: dict[str, Any]) -> str:
    return f"{scenario.get('index', 0)}: {entry_label(scenario.get('matrix_entry'))}"


def _ci(scenario: dict[str, Any]) -> str:
    ci = scenario.get("pass_rate_ci")
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "[-]"


def flaky_text(scenario: dict[str, Any]) -> str:
    retried = scenario.get("retried_runs") or 0
    extra = f", {retried} retried" if retried else ""
    return (f"{scenario.get('passed_runs', 0)}/{scenario.get('completed_runs', 0)} passed, 95% Wilson interval {_ci(scenario)}"
            f"{extra}")


def failed_invariants(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    """Each failed invariant result of the scenario's replicas, with its replica index."""
    out = []
    for run in scenario.get("runs") or []:
        for inv in run.get("invariant_results") or []:
            if isinstance(inv, dict) and inv.get("status") == "failed":
                out.append({"replica": run.get("index"), **inv})
    return out


def _evidence(evidence: Any, limit: int = 2000) -> str:
    text = json.dumps(evidence, sort_keys=True, default=str) if evidence not in (None, {}) else ""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def _xml_text(text: str) -> str:
    """Characters XML 1.0 cannot carry (control characters an agent printed) as \\uXXXX."""
    return "".join(c if c in "\t\n\r" or (0x20 <= ord(c) < 0xD800) or (0xE000 <= ord(c) <= 0xFFFD) or ord(c) >= 0x10000
                   else f"\\u{ord(c):04x}" for c in text)


def _seconds(ms: Any) -> str:
    return f"{(ms or 0) / 1000:.3f}"


# --- JUnit ------------------------------------------------------------------------------------------


def _gate_props(comparison: dict[str, Any] | None) -> list[tuple[str, Any]]:
    if comparison is None:
        return []
    return [("gate", gate_word(comparison)), ("gate_reason", comparison.get("reason")), ("gate_baseline", comparison.get("baseline_id")),
            *((f"quarantined: {q}", "run and reported, not gated") for q in comparison.get("quarantined") or [])]


def junit(results: dict[str, Any], comparison: dict[str, Any] | None = None) -> bytes:
    scenarios = results.get("scenarios") or []
    suite_name = f"{results.get('name')} ({results.get('id')})"
    counts = {"tests": len(scenarios), "failures": 0, "errors": 0, "skipped": 0}
    cases = []
    flaky_props = []
    total_ms = 0
    for s in scenarios:
        wall = sum(r.get("wall_ms") or 0 for r in s.get("runs") or [])
        total_ms += wall
        case = ET.Element("testcase", {"name": _xml_text(scenario_name(s)), "classname": _xml_text(f"svc.{results.get('spec_id')}"),
                                       "time": _seconds(wall)})
        verdict = s.get("verdict")
        if verdict is None:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", {"message": f"scenario is {s.get('status')}: it did not finish"})
        elif verdict == "error":
            counts["errors"] += 1
            errors = "; ".join(s.get("errors") or []) or "every replica errored"
            element = ET.SubElement(case, "error", {"message": _xml_text(errors[:500]), "type": "error"})
            element.text = _xml_text(_replica_lines(s))
        elif not s.get("passed"):
            counts["failures"] += 1
            invs = failed_invariants(s)
            names = sorted({str(i.get("name") or i.get("invariant_id")) for i in invs})
            message = (f"{verdict}: {flaky_text(s)}" + (f"; failed: {', '.join(names)}" if names else ""))
            element = ET.SubElement(case, "failure", {"message": _xml_text(message[:500]), "type": verdict})
            element.text = _xml_text(_failure_body(s, invs))
        if verdict == "flaky":
            flaky_props.append((f"flaky: {scenario_name(s)}", flaky_text(s)))
        out = ET.SubElement(case, "system-out")
        out.text = _xml_text(_system_out(s))
        cases.append(case)
    metrics = results.get("metrics") or {}
    root = ET.Element("testsuites", {"name": "svc", "tests": str(counts["tests"]), "failures": str(counts["failures"]),
                                     "errors": str(counts["errors"]), "skipped": str(counts["skipped"]), "time": _seconds(total_ms)})
    attrs = {"name": _xml_text(suite_name), **{k: str(v) for k, v in counts.items()}, "time": _seconds(total_ms),
             "timestamp": _timestamp(results.get("started_at") or results.get("created_at")), "hostname": socket.gethostname() or "localhost",
             "id": "0", "package": _xml_text(f"svc.{results.get('spec_id')}")}
    suite = ET.SubElement(root, "testsuite", attrs)
    props = ET.SubElement(suite, "properties")
    for name, value in [("experiment_id", results.get("id")), ("spec", f"{results.get('spec_id')} v{results.get('spec_version')}"),
                        ("seed", results.get("seed")), ("status", results.get("status")),
                        ("pass_rate", metrics.get("pass_rate")), ("retried_runs", metrics.get("retried_runs", 0)),
                        *flaky_props, *_gate_props(comparison)]:
        ET.SubElement(props, "property", {"name": _xml_text(str(name)), "value": _xml_text("" if value is None else str(value))})
    suite.extend(cases)
    ET.SubElement(suite, "system-out").text = _xml_text(f"svc eval get {results.get('id')}")
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def tasks_junit(rows: list[dict[str, Any]], name: str = "svc tasks") -> bytes:
    """JUnit XML of a run of task directories (`svc tasks run`, `svc eval run DIR --oracle`): one testcase
    per task, a failure for `fail`/`flaky`, an error for `error` and for a task that could not run."""
    counts = {"tests": len(rows), "failures": 0, "errors": 0, "skipped": 0}
    cases = []
    for row in rows:
        case = ET.Element("testcase", {"name": _xml_text(str(row.get("task"))), "classname": "svc.tasks", "time": "0"})
        verdict, reason = row.get("verdict"), str(row.get("reason") or "")
        if row.get("status") == "not_run":
            counts["errors"] += 1
            ET.SubElement(case, "error", {"message": _xml_text(f"not run: {reason}"[:500]), "type": "not_run"})
        elif verdict == "error" or verdict is None:
            counts["errors"] += 1
            ET.SubElement(case, "error", {"message": _xml_text(f"{verdict or row.get('status')}: {reason}"[:500]),
                                          "type": str(verdict or row.get("status"))})
        elif verdict != "pass":
            counts["failures"] += 1
            ET.SubElement(case, "failure", {"message": _xml_text(f"{verdict}: score {row.get('score')}"), "type": verdict})
        ET.SubElement(case, "system-out").text = _xml_text(
            f"svc eval get {row['experiment_id']}" if row.get("experiment_id") else "")
        cases.append(case)
    root = ET.Element("testsuites", {"name": "svc", **{k: str(v) for k, v in counts.items()}, "time": "0"})
    suite = ET.SubElement(root, "testsuite", {"name": _xml_text(name), **{k: str(v) for k, v in counts.items()}, "time": "0",
                                              "timestamp": _timestamp(None), "hostname": socket.gethostname() or "localhost",
                                              "id": "0", "package": "svc.tasks"})
    ET.SubElement(suite, "properties")
    suite.extend(cases)
    ET.SubElement(suite, "system-out").text = ""
    ET.SubElement(suite, "system-err").text = ""
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def tasks_markdown(rows: list[dict[str, Any]]) -> str:
    """A Markdown table of a run of task directories: each task's verdict, score and reason."""
    passed = sum(1 for r in rows if r.get("verdict") == "pass")
    lines = [f"## svc: {passed}/{len(rows)} tasks passed", "", "| task | verdict | score | experiment | reason |",
             "|---|---|---:|---|---|"]
    for row in rows:
        verdict = row.get("verdict") or row.get("status")
        score = "-" if row.get("score") is None else f"{row['score']:.3g}"
        lines.append(f"| `{_md_code(row.get('task'))}` | {verdict} | {score} | {_md(row.get('experiment_id') or '-')} | "
                     f"{_md(str(row.get('reason') or '')[:300])} |")
    return "\n".join(lines) + "\n"


def _timestamp(iso: Any) -> str:
    """ISO 8601 without a zone (the schema's xs:dateTime pattern), e.g. 2026-11-26T22:05:42."""
    text = str(iso or "1970-01-01T00:00:00")
    return text.replace("Z", "").split("+")[0].split(".")[0]


def _replica_lines(s: dict[str, Any]) -> str:
    lines = []
    for r in s.get("runs") or []:
        retried = f" after {len(r['previous_run_ids'])} retried attempt(s) {', '.join(r['previous_run_ids'])}" if r.get("previous_run_ids") else ""
        lines.append(f"replica {r.get('index')} ({r.get('run_id')}): {r.get('status')}"
                     + (f" - {r.get('reason') or r.get('error')}" if r.get("status") != "passed" and (r.get("reason") or r.get("error")) else "")
                     + retried)
    return "\n".join(lines)


def _failure_body(s: dict[str, Any], invs: list[dict[str, Any]]) -> str:
    lines = [_replica_lines(s), ""]
    for inv in invs[:50]:
        lines.append(f"replica {inv.get('replica')}: invariant {inv.get('name') or inv.get('invariant_id')} failed"
                     + (f" (score {inv['score']})" if isinstance(inv.get("score"), (int, float)) else ""))
        evidence = _evidence(inv.get("evidence"))
        if evidence:
            lines.append(f"  evidence: {evidence}")
    if len(invs) > 50:
        lines.append(f"... and {len(invs) - 50} more failed invariants")
    return "\n".join(lines)


def _system_out(s: dict[str, Any]) -> str:
    rep = s.get("reproducer") or {}
    lines = [f"verdict: {s.get('verdict')} ({flaky_text(s)})"]
    record = s.get("record") or {}
    record_id = record.get("id") or (rep.get("dataset") or {}).get("record_id")
    if record_id:
        lines.append(f"dataset record: {record_id}")
    if record:
        lines.append(f"input: {_evidence(record.get('input'))}")
        lines.append(f"expected: {_evidence(record.get('expected'))}")
    if rep.get("command"):
        lines.append(f"reproduce: {rep['command']}")
    retries = [r for r in s.get("runs") or [] if r.get("previous_run_ids")]
    for r in retries:
        lines.append(f"replica {r.get('index')} was retried: earlier attempts {', '.join(r['previous_run_ids'])}")
    return "\n".join(lines)


# --- Markdown ---------------------------------------------------------------------------------------


def _md(text: Any) -> str:
    """Agent or tenant text in Markdown outside a code span (a table cell, a list item, a heading): HTML
    escaped (a replay-divergence error quoting agent JSON puts no raw HTML into a PR comment),
    backslashes, pipes and brackets escaped (no broken row, no link or image), newlines folded."""
    text = " ".join(str(text).splitlines())
    for raw, safe in (("\\", "\\\\"), ("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("[", "\\["), ("]", "\\]"),
                      ("`", "'")):
        text = text.replace(raw, safe)
    return text


def _md_code(text: Any) -> str:
    """Text inside a `code span` (shown as typed, no HTML): pipes escaped for the table, newlines folded."""
    return " ".join(str(text).splitlines()).replace("|", "\\|").replace("`", "'")


def _num(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name.endswith("_ms"):
        return f"{value:.0f}"
    if name.endswith("_usd"):
        return f"{value:.6f}".rstrip("0").rstrip(".") if value else "0"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def gate_word(comparison: dict[str, Any]) -> str:
    """The gate's word, as `svc eval compare --gate` decides it: regressed, improved, no_change or inconclusive."""
    return str(comparison.get("decision") or ("regressed" if comparison.get("regressed") else "no_change"))


def verdict_line(results: dict[str, Any], comparison: dict[str, Any] | None = None) -> str:
    metrics = results.get("metrics") or {}
    v = metrics.get("verdicts") or {}
    ok = results.get("status") == "completed" and all(s.get("passed") for s in results.get("scenarios") or [])
    gate = ""
    if comparison is not None:
        gate = f" · gate: **{gate_word(comparison)}** vs `{comparison.get('baseline_id')}`"
    return (f"{'✅' if ok else '❌'} **{_md(results.get('name'))}** (`{results.get('id')}`) {results.get('status')}: "
            f"{v.get('pass', 0)} pass · {v.get('fail', 0)} fail · {v.get('flaky', 0)} flaky · {v.get('error', 0)} error, "
            f"pass rate {_num('pass_rate', metrics.get('pass_rate'))}" + (f", {metrics['retried_runs']} retried runs" if metrics.get("retried_runs") else "")
            + gate)


def markdown(results: dict[str, Any], comparison: dict[str, Any] | None = None, limit: int = MARKDOWN_LIMIT) -> str:
    """The report, cut to ``limit`` characters: long lists are shortened first (each cut is noted)."""
    for keep in (None, 200, 50, 20, 5, 0):
        text = _markdown(results, comparison, keep)
        if len(text) <= limit:
            return text
    note = "\n\n_(report cut at the comment size limit)_\n"
    return text[: limit - len(note)] + note


def _section(lines: list[str], title: str, items: list[str], keep: int | None, what: str) -> None:
    if not items:
        return
    lines += ["", f"### {title}", ""]
    shown = items if keep is None else items[:keep]
    lines += shown
    if len(shown) < len(items):
        lines.append(f"\n_{len(items) - len(shown)} more {what} cut to stay under GitHub's 65,536-character limit_")


def _markdown(results: dict[str, Any], comparison: dict[str, Any] | None, keep: int | None) -> str:
    scenarios = results.get("scenarios") or []
    lines = [f"## svc: {_md(results.get('name'))}", "", verdict_line(results, comparison), ""]
    metrics = results.get("metrics") or {}
    if comparison is not None:
        lines += ["| metric | baseline | candidate | delta | decision | p-value | interval |", "|---|---:|---:|---:|---|---:|---|"]
        for m in comparison.get("metrics") or []:
            delta, interval, p_value = m.get("delta"), m.get("interval"), m.get("p_value")
            delta_text = "-" if delta is None else f"{delta:+.4g}"
            p_text = "-" if p_value is None else f"{p_value:.4g}"
            interval_text = "-" if not interval else f"[{interval[0]:+.3g}, {interval[1]:+.3g}]"
            flag = " ⚠️" if m.get("regressed") else ""
            lines.append(f"| {m['name']}{flag} | {_num(m['name'], m.get('baseline'))} | {_num(m['name'], m.get('candidate'))} | "
                         f"{delta_text} | {m.get('decision', '-')} | {p_text} | {interval_text} |")
    else:
        lines += ["| metric | value |", "|---|---:|"]
        for name in ("pass_rate", "total_runs", "p95_wall_ms", "mean_wall_ms", "total_cost_usd", "mean_cost_per_run_usd", "retried_runs"):
            lines.append(f"| {name} | {_num(name, metrics.get(name))} |")
        for k, value in (metrics.get("pass_at_k") or {}).items():
            lines.append(f"| pass@{k} / pass^{k} | {value:.3f} / {(metrics.get('pass_hat_k') or {}).get(k, 0):.3f} |")
        budget = budget_line(metrics.get("time_budget_ms"), metrics.get("total_runs") or 0)
        if budget:
            lines += ["", f"Time per run (mean): {budget}"]
    if comparison is not None:
        if comparison.get("reason"):
            lines += ["", f"**Gate: {gate_word(comparison)}**: {_md(comparison['reason'])}"]
        quarantined = comparison.get("quarantined") or []
        if quarantined:
            lines += ["", "Quarantined (run and reported, not gated): " + ", ".join(f"`{_md(q)}`" for q in quarantined)]
        _section(lines, "Regressions", [f"- {_md(r)}" for r in comparison.get("regressions") or []], keep, "regressions")
        flips = [f"- `{_md_code(entry_label(c.get('matrix_entry')))}`: {c['baseline']['verdict']} → {c['candidate']['verdict']}"
                 for c in comparison.get("changed_scenarios") or [] if c["baseline"].get("verdict") != c["candidate"].get("verdict")]
        _section(lines, "Verdicts that flipped", flips, keep, "scenarios")
        _effects_section(lines, comparison, keep)
    flaky = [f"- `{_md_code(scenario_name(s))}`: {flaky_text(s)}" for s in scenarios if s.get("verdict") == "flaky"]
    _section(lines, "Flaky", flaky, keep, "flaky scenarios")
    failing = [s for s in scenarios if not s.get("passed")]
    rows = []
    for s in failing:
        invs = sorted({str(i.get("name") or i.get("invariant_id")) for i in failed_invariants(s)})
        why = ", ".join(invs) or "; ".join(s.get("errors") or []) or (s.get("status") or "")
        if s.get("record"):
            why += f" · input {_evidence(s['record'].get('input'), 200)}"
        rows.append(f"| `{_md_code(scenario_name(s))}` | {s.get('verdict') or s.get('status')} | {_md(why[:300])} |")
    if rows:
        shown = rows if keep is None else rows[:keep]
        lines += ["", "### Scenarios that did not pass", "", "| scenario | verdict | failed invariants / errors |", "|---|---|---|", *shown]
        if len(shown) < len(rows):
            lines.append(f"\n_{len(rows) - len(shown)} more scenarios cut to stay under GitHub's 65,536-character limit_")
    repro = [f"{s['reproducer']['command']}" for s in failing if (s.get("reproducer") or {}).get("command")]
    if repro:
        shown = repro if keep is None else repro[:keep]
        lines += ["", "### Reproduce", "", "```sh", *shown, "```"]
        if len(shown) < len(repro):
            lines.append(f"\n_{len(repro) - len(shown)} more reproducers cut (svc eval scenarios --experiment {results.get('id')} "
                         "--status not_passed lists them all)_")
    return "\n".join(lines) + "\n"


EFFECT_SIDES = {"between": "between the experiments", "baseline": "between the baseline's replicas",
                "candidate": "between the candidate's replicas"}


def effect_rows(comparison: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The comparison's effects section as (scenario, where, difference) rows: per scenario, what differs
    between the experiments first, then between one side's replicas."""
    rows = []
    for scenario in comparison.get("effects") or []:
        label = entry_label(scenario.get("matrix_entry"))
        for item in sorted(scenario.get("differences") or [], key=lambda d: d.get("side") != "between"):
            rows.append((label, EFFECT_SIDES.get(item.get("side"), str(item.get("side"))), str(item.get("message") or item.get("key"))))
    return rows


def _effects_section(lines: list[str], comparison: dict[str, Any], keep: int | None) -> None:
    """What the runs changed differently (daemon/effects): a table, or one line saying none did or why
    nothing was compared. A comparison without the field (an older svcd) gets no section."""
    if "effects" not in comparison:
        return
    rows = effect_rows(comparison)
    if not rows:
        why = ("not compared: the baseline is a bundle (its runs are not in this daemon)"
               if comparison.get("baseline_source") == "bundle" else
               "no effect (db writes, HTTP and model calls, files, processes) differs between the experiments' runs or "
               "between replicas")
        lines += ["", "### Effects", "", f"_{why}_"]
        return
    shown = rows if keep is None else rows[:keep]
    lines += ["", "### Effects that differ", "", "| scenario | where | difference |", "|---|---|---|",
              *(f"| `{_md_code(label)}` | {where} | {_md(text)} |" for label, where, text in shown)]
    if len(shown) < len(rows):
        lines.append(f"\n_{len(rows) - len(shown)} more effect differences cut to stay under GitHub's 65,536-character limit_")


# --- HTML -------------------------------------------------------------------------------------------


async def gather_details(client: Any, results: dict[str, Any], limit: int = DETAIL_RUNS) -> dict[str, Any]:
    """Audit events (from each run's trajectory) and trace events (from the experiment export) of
    the first ``limit`` runs, by run id; a run whose trajectory cannot be read is left out."""
    from urllib.parse import parse_qs, urlparse

    from client.routes import R

    details: dict[str, dict[str, Any]] = {}
    runs = [r for s in results.get("scenarios") or [] for r in s.get("runs") or []][:limit]
    wanted = {r["run_id"] for r in runs}
    try:
        raw = await client.call(R.EXPORT_EXPERIMENT, query={"format": "ndjson"}, raw=True, experiment_id=results["id"])
        for line in raw.splitlines():
            item = json.loads(line)
            if item.get("type") == "trace_event" and item.get("run_id") in wanted:
                details.setdefault(item["run_id"], {"audit_events": [], "trace_events": []})["trace_events"].append(
                    {k: item.get(k) for k in ("span_id", "parent_span_id", "event_type", "phase", "tool", "status", "duration_ms", "ts")})
    except Exception:  # noqa: BLE001  (a report without traces is still a report)
        pass
    for run in runs:
        url = run.get("trajectory_url")
        if not url:
            continue
        query = {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}
        try:
            trajectory = await client.call(R.GET_RUN_TRAJECTORY, query=query, run_id=run["run_id"])
        except Exception:  # noqa: BLE001
            continue
        audit = trajectory.get("audit_events") if isinstance(trajectory, dict) else None
        if isinstance(audit, list):
            details.setdefault(run["run_id"], {"audit_events": [], "trace_events": []})["audit_events"] = audit[:500]
    return details


# `<`, `>` and `&` only ever occur inside JSON strings, where \\uXXXX means the same character: with none of
# them left, no `</script>`, `<!--` or `<script` can end or bend the element (`<\\!--` is not valid JSON).
_SCRIPT_SAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _script_json(data: Any) -> str:
    """JSON inside <script>: no sequence an agent wrote can end or break the element."""
    return "".join(_SCRIPT_SAFE.get(c, c) for c in json.dumps(data, default=str))


def html(results: dict[str, Any], details: dict[str, Any] | None = None, comparison: dict[str, Any] | None = None) -> str:
    payload = {"results": results, "details": details or {}, "comparison": comparison}
    title = f"svc report: {results.get('name')} ({results.get('id')})"
    parts = {"__TITLE__": _html_escape(title), "__DATA__": _script_json(payload)}
    return re.sub("__TITLE__|__DATA__", lambda m: parts[m.group(0)], HTML_TEMPLATE)  # one pass: neither is read for the other


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


HTML_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'">
<title>__TITLE__</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}.muted{color:#777}.pass{color:#17803d}.fail,.error{color:#b42318}.flaky{color:#b54708}
.scn{border:1px solid #ddd;border-radius:6px;margin:.5em 0;padding:.4em .8em}
.scn summary{cursor:pointer;font-weight:600}.run{margin:.4em 0 .4em 1em;border-left:3px solid #eee;padding-left:.6em}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 6px;text-align:left;vertical-align:top}
pre{white-space:pre-wrap;background:#f7f7f7;padding:4px;margin:2px 0;max-height:20em;overflow:auto}
ul.tree{margin:0;padding-left:1.2em}#errors{color:#b42318}
</style></head><body>
<h1 id="title"></h1><p id="summary"></p>
<p><label>Filter <input id="filter" placeholder="scenario, invariant, error"></label>
<label>Verdict <select id="verdict"><option value="">all</option><option>pass</option><option>fail</option>
<option>flaky</option><option>error</option></select></label> <span id="shown"></span></p>
<div id="comparison"></div><div id="scenarios"></div><div id="errors"></div>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
window.addEventListener("error", function (e) { document.getElementById("errors").textContent += "script error: " + e.message + "\\n"; });
const DATA = JSON.parse(document.getElementById("data").textContent);
const R = DATA.results, D = DATA.details || {};
// Keys come from agents (span ids, run ids): read own properties only, so `constructor` or `__proto__` is a key like any other.
function own(o, k) { return o != null && typeof k === "string" && Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined; }
function el(tag, attrs, ...kids) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (k === "class") n.className = v; else n.setAttribute(k, v); }
  for (const k of kids) { if (k !== null && k !== undefined) n.append(k instanceof Node ? k : String(k)); }
  return n;
}
function label(entry) {
  const keys = Object.keys(entry || {});
  return keys.length ? keys.map(k => k + "=" + (typeof entry[k] === "string" ? entry[k] : JSON.stringify(entry[k]))).join(",") : "(no matrix)";
}
function tree(events) {
  const spans = new Map(), roots = [];
  for (const e of events) { if (e.span_id && !spans.has(e.span_id)) spans.set(e.span_id, Object.assign({}, e, {kids: []})); }
  for (const s of spans.values()) { const p = spans.get(s.parent_span_id); if (p && p !== s) p.kids.push(s); else roots.push(s); }
  function render(list, depth) {
    const ul = el("ul", {class: "tree"});
    for (const s of list) {
      const li = el("li", {}, (s.tool || s.event_type || "span") + " " + (s.status || "") + (s.duration_ms != null ? " " + s.duration_ms + " ms" : ""));
      if (s.kids.length && depth < 50) li.append(render(s.kids, depth + 1));
      ul.append(li);
    }
    return ul;
  }
  return render(roots, 0);
}
function runNode(run) {
  const box = el("div", {class: "run"}, el("div", {}, "replica " + run.index + " ", el("b", {class: run.verdict || ""}, run.status || "?"),
    " ", el("span", {class: "muted"}, run.run_id + (run.reason ? " · " + run.reason : "") +
    ((run.previous_run_ids || []).length ? " · retried after " + run.previous_run_ids.join(", ") : ""))));
  const invs = run.invariant_results || [];
  if (invs.length) {
    const t = el("table", {}, el("tr", {}, el("th", {}, "invariant"), el("th", {}, "status"), el("th", {}, "evidence")));
    for (const inv of invs) {
      t.append(el("tr", {class: "inv " + (inv.status || "")}, el("td", {}, inv.name || inv.invariant_id),
        el("td", {class: inv.status === "failed" ? "fail" : (inv.status === "passed" ? "pass" : "")}, inv.status),
        el("td", {}, el("pre", {}, JSON.stringify(inv.evidence || {}, null, 1)))));
    }
    box.append(t);
  }
  const d = own(D, run.run_id);
  if (d && d.audit_events && d.audit_events.length) {
    box.append(el("details", {}, el("summary", {}, d.audit_events.length + " audit events"),
      el("pre", {}, d.audit_events.map(a => JSON.stringify(a)).join("\\n"))));
  }
  if (d && d.trace_events && d.trace_events.length) {
    box.append(el("details", {}, el("summary", {}, d.trace_events.length + " trace events"), tree(d.trace_events)));
  }
  return box;
}
function text(s) {
  const parts = [label(s.matrix_entry), s.verdict || s.status, (s.errors || []).join(" ")];
  for (const r of s.runs || []) for (const i of r.invariant_results || []) parts.push(i.name || i.invariant_id, i.status);
  return parts.join(" ").toLowerCase();
}
const scenarios = R.scenarios || [];
document.getElementById("title").textContent = (R.name || "") + " (" + R.id + ")";
const m = R.metrics || {}, v = m.verdicts || {};
document.getElementById("summary").textContent = "spec " + R.spec_id + " v" + R.spec_version + " · " + R.status + " · " +
  scenarios.length + " scenarios · pass " + (v.pass || 0) + " · fail " + (v.fail || 0) + " · flaky " + (v.flaky || 0) +
  " · error " + (v.error || 0) + " · pass rate " + (m.pass_rate == null ? "-" : m.pass_rate.toFixed(3)) +
  " · retried runs " + (m.retried_runs || 0);
if (DATA.comparison) {
  const c = DATA.comparison, t = el("table", {}, el("tr", {}, ...["metric", "baseline", "candidate", "decision", "p-value"].map(h => el("th", {}, h))));
  for (const x of c.metrics || []) t.append(el("tr", {}, el("td", {}, x.name), el("td", {}, x.baseline), el("td", {}, x.candidate),
    el("td", {class: x.regressed ? "fail" : ""}, x.decision), el("td", {}, x.p_value == null ? "-" : x.p_value)));
  const word = c.decision || (c.regressed ? "regressed" : "no_change");
  document.getElementById("comparison").append(el("h2", {}, "Against " + c.baseline_id + ": gate " + word), el("p", {}, c.reason || ""), t);
  if (Array.isArray(c.effects)) document.getElementById("comparison").append(effects(c));
}
function effects(c) {
  // What the runs changed differently (db writes, HTTP and model calls, files, processes), per scenario.
  const where = {between: "between the experiments", baseline: "between the baseline's replicas", candidate: "between the candidate's replicas"};
  const box = el("div", {id: "effects"}, el("h3", {}, "Effects that differ"));
  const t = el("table", {}, el("tr", {}, ...["scenario", "where", "difference"].map(h => el("th", {}, h))));
  let n = 0;
  for (const s of c.effects) {
    const diffs = (s.differences || []).slice().sort((a, b) => (a.side !== "between") - (b.side !== "between"));
    for (const d of diffs) {
      n++;
      t.append(el("tr", {class: "effect " + (d.side === "between" ? "between" : "replicas")}, el("td", {}, label(s.matrix_entry)),
        el("td", {}, own(where, d.side) || String(d.side)), el("td", {}, d.message || d.key)));
    }
  }
  if (n) box.append(t);
  else box.append(el("p", {class: "muted"}, c.baseline_source === "bundle" ? "not compared: the baseline is a bundle (its runs are not in this daemon)"
    : "no effect (db writes, HTTP and model calls, files, processes) differs between the experiments' runs or between replicas"));
  return box;
}
const nodes = scenarios.map(s => {
  const node = el("details", {class: "scn", open: ""}, el("summary", {}, el("span", {class: s.verdict || ""}, (s.verdict || s.status || "?").toUpperCase()),
    " " + s.index + ": " + label(s.matrix_entry) + " · " + s.passed_runs + "/" + s.completed_runs + " passed" +
    ((s.retried_runs || 0) ? " · " + s.retried_runs + " retried" : "")));
  if (s.reproducer && s.reproducer.command) node.append(el("pre", {}, s.reproducer.command));
  for (const r of s.runs || []) node.append(runNode(r));
  node.dataset.text = text(s); node.dataset.verdict = s.verdict || "";
  document.getElementById("scenarios").append(node);
  return node;
});
function apply() {
  const q = document.getElementById("filter").value.toLowerCase(), want = document.getElementById("verdict").value;
  let shown = 0;
  for (const n of nodes) { const ok = (!q || n.dataset.text.includes(q)) && (!want || n.dataset.verdict === want); n.hidden = !ok; if (ok) shown++; }
  document.getElementById("shown").textContent = shown + " of " + nodes.length + " shown";
}
document.getElementById("filter").addEventListener("input", apply);
document.getElementById("verdict").addEventListener("change", apply);
apply();
</script></body></html>
"""

