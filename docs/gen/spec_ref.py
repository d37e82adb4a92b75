"""The spec reference (docs/reference/spec.md), from the JSON schema of the spec models
(daemon.spec.SpecDocument): every key with its type, default, whether it is required, its
description and an example (the value examples/quickstart.yaml gives it, or the schema's own)."""
from __future__ import annotations

import json
import re
from typing import Any

import refcommon as common
import yaml

SCRIPT = "spec_ref.py"
EXAMPLE_SPEC = common.ROOT / "examples" / "quickstart.yaml"


def schema() -> dict[str, Any]:
    from daemon.spec import SpecDocument

    return SpecDocument.model_json_schema()


def _anchor(name: str) -> str:
    return name.lower()


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(prop: dict[str, Any], anchor: Any = None) -> str:
    """A short Markdown rendering of a property's type, linking object types to their section."""
    anchor = anchor or _anchor
    if "$ref" in prop:
        name = _ref_name(prop["$ref"])
        return f"[{name}](#{anchor(name)})"
    if "oneOf" in prop:
        disc = prop.get("discriminator", {})
        key = disc.get("propertyName")
        by_ref = {v: k for k, v in disc.get("mapping", {}).items()}
        parts = []
        for option in prop["oneOf"]:
            text = type_of(option, anchor)
            if key and option.get("$ref") in by_ref:
                text += f" ({key}: `{by_ref[option['$ref']]}`)"
            parts.append(text)
        return "one of " + ", ".join(parts)
    if "anyOf" in prop:
        options = [o for o in prop["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(prop["anyOf"])
        text = " or ".join(type_of(o, anchor) for o in options)
        return text + (" or null" if nullable else "")
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " or ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    kind = prop.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return "list of " + type_of(prop.get("items", {}), anchor)
    if kind == "object":
        extra = prop.get("additionalProperties")
        if isinstance(extra, dict):
            keys = prop.get("propertyNames", {}).get("enum")
            key = " or ".join(f"`{k}`" for k in keys) if keys else "name"
            return f"map of {key} → " + type_of(extra, anchor)
        if "properties" in prop:
            inner = ", ".join(f"`{k}`" for k in prop["properties"])
            return f"object {{{inner}}}"
        return "object"
    if kind == "string":
        if prop.get("format"):
            return f"string ({prop['format']})"
        return "string"
    if kind in ("integer", "number", "boolean"):
        bounds = []
        for word, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
            if word in prop:
                bounds.append(f"{sign} {prop[word]}")
        return kind + (f" ({', '.join(bounds)})" if bounds else "")
    if kind is None and not prop:
        return "any"
    return str(kind or "any")


def _description(prop: dict[str, Any]) -> str:
    text = prop.get("description")
    if not text and "anyOf" in prop:
        for option in prop["anyOf"]:
            if option.get("description"):
                text = option["description"]
                break
    return " ".join((text or "").replace("``", "`").split())


def _default(name: str, prop: dict[str, Any], required: set[str]) -> str:
    if name in required:
        return "required"
    if "default" not in prop:
        return "–"
    return f"`{json.dumps(prop['default'])}`"


def _example_values() -> dict[str, Any]:
    """Values of examples/quickstart.yaml by schema section and key: {(section, key): value}."""
    return yaml.safe_load(EXAMPLE_SPEC.read_text())


def _walk_order(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(definition name, path where first reached) in document order, breadth first."""
    defs = doc.get("$defs", {})
    seen: dict[str, str] = {}
    queue: list[tuple[dict[str, Any], str]] = [(doc, "")]
    while queue:
        node, path = queue.pop(0)
        for key, prop in node.get("properties", {}).items():
            child = f"{path}.{key}" if path else key
            for ref, suffix in _refs(prop):
                name = _ref_name(ref)
                if name not in seen:
                    seen[name] = child + suffix
                    queue.append((defs[name], child + suffix))
    return list(seen.items())


def _refs(prop: Any, suffix: str = "") -> list[tuple[str, str]]:
    """Every $ref inside a property, with how its path continues (`[]` for a list item, `.<name>` for a map)."""
    out: list[tuple[str, str]] = []
    if isinstance(prop, dict):
        if "$ref" in prop:
            out.append((prop["$ref"], suffix))
        for key in ("anyOf", "oneOf"):
            for option in prop.get(key, []):
                out += _refs(option, suffix)
        if prop.get("type") == "array":
            out += _refs(prop.get("items", {}), suffix + "[]")
        if isinstance(prop.get("additionalProperties"), dict):
            out += _refs(prop["additionalProperties"], suffix + ".<name>")
    return out


def _candidates(example: Any, path: str) -> list[Any]:
    """The values at a dotted path of the example spec: every map entry for `<name>`, every item for `[]`."""
    nodes = [example]
    for part in re.findall(r"[^.]+", path):
        item = part.endswith("[]")
        key = part[:-2] if item else part
        nxt: list[Any] = []
        for node in nodes:
            if not isinstance(node, dict):
                continue
            if key == "<name>":
                nxt += list(node.values())
            elif key in node:
                nxt.append(node[key])
        if item:
            nxt = [entry for node in nxt if isinstance(node, list) for entry in node]
        nodes = nxt
    return nodes


def _example(section_path: str, key: str, prop: dict[str, Any], example: Any, variant: str | None) -> str:
    value = None
    parents = _candidates(example, section_path) if section_path else [example]
    for parent in parents:
        if isinstance(parent, dict) and (variant is None or parent.get("type") == variant) and key in parent:
            value = parent[key]
            break
    if value is None and prop.get("examples"):
        value = prop["examples"][0]
    if value is None:
        for option in prop.get("anyOf", []):
            if option.get("examples"):
                value = option["examples"][0]
                break
    if value is None:
        return "–"
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > 60:
        text = text[:57] + "…"
    return f"`{text}`"


def _inline_objects(prop: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for option in [prop, *prop.get("anyOf", []), *[o for a in prop.get("anyOf", []) for o in a.get("anyOf", [])]]:
        if isinstance(option, dict) and option.get("type") == "object" and option.get("properties") and "$ref" not in option:
            found.append(option)
    return found


def _variant(defs: dict[str, Any], name: str) -> str | None:
    type_prop = defs[name].get("properties", {}).get("type", {})
    if "const" in type_prop:
        return type_prop["const"]
    if len(type_prop.get("enum", [])) == 1:
        return type_prop["enum"][0]
    return None


# What a key does, where neither its model's schema nor a comment above its field in daemon/spec/ says
# it; keyed by section (the model's name, `document` for the top level) and key. A test fails on a
# note whose key the schema no longer has.
NOTES: dict[tuple[str, str], str] = {
    ("document", "version"): "The spec format's version: `1`.",
    ("document", "id"): "The spec's id, unique per tenant; uploading the same id again makes a new version.",
    ("document", "description"): "Free text, shown in lists.",
    ("document", "base"): "The agent's container image, fully qualified (`localhost/svc/python:3.11` is a stock image).",
    ("document", "task"): "What the agent is asked: the prompt and its inputs.",
    ("document", "agent"): "The agent under test: a snapshot you uploaded, a program in the base image, or an image of its own.",
    ("document", "services"): "Backing services on the sandbox's private network, reachable by name.",
    ("document", "fixtures"): "Data applied after the services are ready and before the agent starts.",
    ("document", "secrets"): "Secrets by name and source (`env`, `env:NAME`, `file:PATH`, `command:CMD`, `dashboard`), resolved on your machine; the agent sees each as an environment variable.",
    ("document", "setup"): "Commands run in the agent's container before the agent.",
    ("document", "network"): "What the sandbox may reach and what may reach it.",
    ("document", "audit"): "What is recorded while the agent runs; forbidden rules judge it.",
    ("document", "invariants"): "Postconditions checked after the agent ends, by name; at least one.",
    ("document", "forbidden"): "Trajectory rules judged on the audit log.",
    ("document", "scoring"): "How invariant scores and replicas make a verdict.",
    ("document", "parallelism"): "Replicas, matrix entries and datasets: the scenarios of an experiment.",
    ("document", "determinism"): "A frozen or shifted clock, a seed and fixed addresses, so a run can be replayed.",
    ("document", "resources"): "Limits of the sandbox; capped by the daemon's `SERVICE_MAX_*` settings.",
    ("document", "teardown"): "What is kept when the sandbox goes: audit log, database dumps, a workspace snapshot.",
    ("document", "score_rules"): "Rules that score the spans of the experiment's traces after it ran.",
    ("document", "alerts"): "Alert rules evaluated after each experiment of this spec.",
    ("document", "models"): "Model providers the agent reaches through the sandbox's model gateway, with a budget per run.",
    ("Task", "prompt"): "The task's text; `{{ name }}` is replaced from `inputs`, the matrix entry or the dataset record. The agent gets it as `SERVICE_TASK_PROMPT` and in `/workspace/.svc/task.json`.",
    ("Task", "inputs"): "Values for the prompt's templates; also in `task.json` under `inputs`.",
    ("CliAgent", "binary"): "The program, found in the base image.",
    ("CliAgent", "args"): "Its arguments.",
    ("ImageAgent", "image"): "The agent's own image, fully qualified.",
    ("SnapshotAgent", "snapshot"): "An uploaded snapshot's name: its latest version (`svc agents upload`).",
    ("SnapshotAgent", "snapshot_id"): "One snapshot version, pinned.",
    ("Setup", "commands"): "Shell commands run in order in the agent's container; a failure fails the boot.",
    ("Network", "egress"): "Outbound traffic through the sandbox's proxy.",
    ("Network", "ingress"): "Inbound traffic from the host.",
    ("Network", "dns_overrides"): "Host names the agent resolves to one of the sandbox's services (an `http_mock` standing in for an API).",
    ("Audit", "db_writes"): "Record every committed write of the PostgreSQL services, from inside the server (the agent connects as the role `agent`).",
    ("Audit", "http_calls"): "Record every HTTP call through the egress proxy.",
    ("Audit", "process_spawns"): "Record the processes the agent starts.",
    ("Audit", "stdout_capture"): "Record the agent's standard output and error.",
    ("Audit", "file_system"): "Record file writes and deletions under the watched paths.",
    ("Invariant", "description"): "Shown with the result.",
    ("Invariant", "weight"): "Its share of the run's weighted score.",
    ("Invariant", "gate"): "A failing gate invariant fails the run whatever the score.",
    ("Invariant", "check"): "What is checked, by `type`.",
    ("Forbidden", "db_writes_outside"): "Tables the agent may write; a committed write to any other fails the run (`[]`: no writes at all).",
    ("Forbidden", "http_except"): "Hosts the agent may call; any other HTTP call fails the run (`[]`: no HTTP at all).",
    ("Forbidden", "secrets_in_logs"): "`deny`: a secret's value in captured output fails the run.",
    ("Forbidden", "file_writes_outside"): "Paths the agent may write under; a write elsewhere fails the run.",
    ("Scoring", "pass_threshold"): "The weighted score a run needs to pass.",
    ("Scoring", "replica_aggregation"): "How a scenario's replicas make its verdict.",
    ("Parallelism", "replicas"): "Runs per scenario, each in its own sandbox with its own seed.",
    ("Parallelism", "matrix"): "One scenario per entry; its values fill the task's templates and inputs.",
    ("Parallelism", "dataset"): "One scenario per record of a dataset version.",
    ("Determinism", "seed"): "The default seed of this spec's sandboxes: `SERVICE_SEED`, `PYTHONHASHSEED` and Python's `random` follow it.",
    ("Determinism", "dns"): "`static`: a subnet derived from the seed and a fixed address per container.",
    ("Resources", "concurrency_limit"): "At most this many runs of this spec at once; `auto` (the default) lets the daemon choose from the host and how fast sandboxes boot.",
    ("Resources", "cpus"): "CPUs for the agent's container.",
    ("Resources", "pids"): "Processes in the agent's container.",
    ("Teardown", "always_run"): "Export also when the run failed or errored.",
    ("Teardown", "export"): "What to keep, and where (paths under the run's artifacts).",
    ("ReplicaAggregation", "strategy"): "`majority` of replicas, `all_must_pass`, or `percentage` (at least `min_pass_rate`).",
    ("ReplicaAggregation", "min_pass_rate"): "For `percentage`: the share of replicas that must pass.",
    ("Egress", "default"): "`deny` (only `allow` passes) or `allow` (everything passes).",
    ("Egress", "allow"): "Host names or globs (`*.github.com`) allowed out.",
    ("FileSystemAudit", "watch"): "Paths whose changes are recorded.",
    ("FileSystemAudit", "track"): "Which changes: `writes`, `deletes`.",
    ("CommandExitCheck", "command"): "Run by `sh -c` in /workspace after the agent.",
    ("CommandExitCheck", "expect_exit_code"): "The exit code that passes.",
    ("FileExistsCheck", "path"): "Relative to /workspace.",
    ("FileAbsentCheck", "path"): "Relative to /workspace.",
    ("SqlCheck", "expect_rows"): "The number of rows.",
    ("SqlCheck", "expect_scalar"): "The first column of the first row.",
    ("SqlCheck", "expect"): "The whole result: rows as lists of values or column-to-value maps.",
    ("WaitFor", "port"): "Ready when this port listens.",
    ("WaitFor", "log"): "Ready when this line appears in the service's log.",
    ("Alert", "condition"): "`<metric> <operator> <value>`, e.g. `pass_rate < 0.8`.",
    ("Alert", "window"): "`last_N_runs` (fires only when the last N experiments all crossed) or `last_24h`.",
    ("Alert", "notify"): "`webhook`, `chat` or `email`.",
}


def _lineage(name: str) -> list[str]:
    """The class names a spec model inherits its fields from, itself first (comments sit where a field is declared)."""
    import daemon.spec as spec

    for value in vars(spec).values():
        if isinstance(value, type) and value.__name__ == name:
            return [c.__name__ for c in value.__mro__]
    return [name]


def field_comments() -> dict[tuple[str, str], str]:
    """The comment lines right above a field of a spec model in daemon/spec/*.py, by (model, field)."""
    import ast

    out: dict[tuple[str, str], str] = {}
    for path in sorted((common.ROOT / "daemon" / "spec").glob("*.py")):
        text, tree = common.parse(path)
        lines = text.splitlines()
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    comment = []
                    index = stmt.lineno - 2
                    while index >= 0 and lines[index].strip().startswith("#"):
                        comment.insert(0, lines[index].strip().lstrip("#").strip())
                        index -= 1
                    if comment:
                        out[(cls.name, stmt.target.id)] = " ".join(comment)
    return out


def _section(title: str, anchor: str, path: str, node: dict[str, Any], example: Any, variant: str | None) -> str:
    out = [f"## {title} {{#{anchor}}}\n"]
    if path:
        out.append(f"At `{path}`" + (f" with `type: {variant}`" if variant else "") + ".\n")
    description = " ".join(node.get("description", "").replace("``", "`").split())
    if description:
        out.append(description + "\n")
    required = set(node.get("required", []))
    comments = field_comments()
    section = "document" if anchor == "document" else title
    lineage = _lineage(title if section != "document" else "SpecDocument")
    rows = []
    for key, prop in node.get("properties", {}).items():
        comment = next((comments[(name, key)] for name in lineage if (name, key) in comments), "")
        text = _description(prop) or comment or NOTES.get((section, key), "")
        rows.append([f"`{key}`", type_of(prop), _default(key, prop, required), text,
                     _example(path, key, prop, example, variant)])
        for inline in _inline_objects(prop):  # an object spelled out in place (no section of its own): its keys here
            inner_required = set(inline.get("required", []))
            for sub, sub_prop in inline["properties"].items():
                rows.append([f"`{key}.{sub}`", type_of(sub_prop), _default(sub, sub_prop, inner_required),
                             _description(sub_prop), "–"])
    if rows:
        out.append(common.table(["Key", "Type", "Default", "Description", "Example"], rows))
    return "\n".join(out)


def render() -> str:
    doc = schema()
    defs = doc.get("$defs", {})
    example = _example_values()
    out = [common.header(SCRIPT), "# Spec reference\n",
           "A spec is one YAML document: what the agent is given (a sandbox with services and fixtures), what it "
           "is asked (the task), and how what it did is judged (invariants, forbidden rules, scoring). "
           "Every key below comes from the spec models' JSON schema (`daemon/spec/`), so this page lists exactly "
           "what the daemon accepts; an unknown key is an error naming its file, line and path. Examples are the "
           "values of `examples/quickstart.yaml` "
           "where it sets the key. `svc spec validate FILE` checks a spec offline.\n",
           "Durations are seconds as a number or a string like `90s`, `5m`, `1h30m`, `250ms`; sizes are bytes or a "
           "string like `512m`, `1g` (binary units).\n"]
    out.append(_section("The document", "document", "", doc, example, None))
    for name, path in _walk_order(doc):
        out.append(_section(name, _anchor(name), path, defs[name], example, _variant(defs, name)))
    return "\n".join(out)
