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


def _section(title: str, anchor: str, path: str, node: dict[str, Any], example: Any, variant: str | None) -> str:
    out = [f"## {title} {{#{anchor}}}\n"]
    if path:
        out.append(f"At `{path}`" + (f" with `type: {variant}`" if variant else "") + ".\n")
    description = " ".join(node.get("description", "").replace("``", "`").split())
    if description:
        out.append(description + "\n")
    required = set(node.get("required", []))
    rows = []
    for key, prop in node.get("properties", {}).items():
        rows.append([f"`{key}`", type_of(prop), _default(key, prop, required), _description(prop),
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
