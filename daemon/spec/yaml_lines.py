"""YAML parsing that remembers where every key and list item came from.

:func:`parse_yaml_with_lines` returns the plain Python data, a map from path tuples
(``("invariants", "tests", "check", "type")``, ``("services", 1)``) to 1-based line numbers, and
the duplicate keys it saw (PyYAML silently keeps the last one).

Timestamps are left as strings (``clock: 2024-01-01T00:00:00Z`` stays text), so the data is
always JSON-compatible. Aliases are expanded at most :data:`MAX_NODES` times, which stops
"billion laughs" documents before they reach validation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["YamlProblem", "ParsedYaml", "parse_yaml_with_lines", "MAX_NODES"]

Path = tuple[Any, ...]
MAX_NODES = 200_000


class _SpecLoader(yaml.SafeLoader):
    """SafeLoader without the implicit timestamp type."""


_SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass(frozen=True)
class YamlProblem:
    path: Path
    line: int | None
    msg: str


@dataclass
class ParsedYaml:
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)
    problems: list[YamlProblem] = field(default_factory=list)
    """Duplicate keys. ``data`` is still usable (the last value wins)."""


class YamlSyntaxError(ValueError):
    def __init__(self, msg: str, line: int | None) -> None:
        super().__init__(msg)
        self.msg = msg
        self.line = line


def _syntax_message(exc: yaml.YAMLError) -> tuple[str, int | None]:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        parts = [p for p in (exc.context, exc.problem) if p]
        msg = "invalid YAML: " + (", ".join(parts) if parts else "syntax error")
        if exc.context_mark is not None and exc.problem_mark is not None and exc.context_mark.line != exc.problem_mark.line:
            msg += f" (started at line {exc.context_mark.line + 1})"
        return msg, (mark.line + 1) if mark is not None else None
    return f"invalid YAML: {exc}", None


class _Walker:
    def __init__(self, loader: _SpecLoader) -> None:
        self.loader = loader
        self.lines: dict[Path, int] = {}
        self.problems: list[YamlProblem] = []
        self.count = 0
        self.stack: set[int] = set()

    def key_of(self, node: Node) -> Any:
        if isinstance(node, ScalarNode):
            try:
                key = self.loader.construct_object(node)
            except yaml.YAMLError:
                return node.value
            try:
                hash(key)
            except TypeError:
                return node.value
            return key
        return None

    def walk(self, node: Node, path: Path) -> None:
        self.count += 1
        if self.count > MAX_NODES:
            raise YamlSyntaxError(
                f"document too large: more than {MAX_NODES} nodes after expanding aliases", None
            )
        if id(node) in self.stack:
            raise YamlSyntaxError("recursive alias: a node contains itself", node.start_mark.line + 1)
        if isinstance(node, MappingNode):
            self.stack.add(id(node))
            self.walk_mapping(node, path)
            self.stack.discard(id(node))
        elif isinstance(node, SequenceNode):
            self.stack.add(id(node))
            for i, item in enumerate(node.value):
                self.lines.setdefault(path + (i,), item.start_mark.line + 1)
                self.walk(item, path + (i,))
            self.stack.discard(id(node))

    def walk_mapping(self, node: MappingNode, path: Path) -> None:
        first_line: dict[Any, int] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merges.append(value_node)
                continue
            key = self.key_of(key_node)
            if key is None:
                continue
            line = key_node.start_mark.line + 1
            if key in first_line:
                self.problems.append(
                    YamlProblem(path + (key,), line, f"duplicate key '{key}' (first at line {first_line[key]})")
                )
            else:
                first_line[key] = line
            self.lines[path + (key,)] = line
            self.walk(value_node, path + (key,))
        # `<<: *base` — merged keys point at the merged mapping's lines unless overridden here.
        for merged in merges:
            sources = merged.value if isinstance(merged, SequenceNode) else [merged]
            for source in sources:
                if not isinstance(source, MappingNode):
                    continue
                for key_node, value_node in source.value:
                    key = self.key_of(key_node)
                    if key is None or key in first_line:
                        continue
                    first_line[key] = key_node.start_mark.line + 1
                    self.lines[path + (key,)] = first_line[key]
                    self.walk(value_node, path + (key,))


def parse_yaml_with_lines(text: str) -> ParsedYaml:
    """Parse one YAML document. Raises :class:`YamlSyntaxError` (with a 1-based line when known)."""
    try:
        loader = _SpecLoader(text)
    except yaml.YAMLError as exc:  # the reader refuses the text itself (NUL and other control characters)
        msg, line = _syntax_message(exc)
        raise YamlSyntaxError(msg, line) from None
    try:
        node = loader.get_single_node()
        if node is None:
            return ParsedYaml(data=None)
        walker = _Walker(loader)
        walker.walk(node, ())
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        msg, line = _syntax_message(exc)
        raise YamlSyntaxError(msg, line) from None
    except RecursionError:
        raise YamlSyntaxError("document nested too deeply", None) from None
    except YamlSyntaxError:
        raise
    except (ValueError, OverflowError) as exc:  # a scalar PyYAML cannot build, e.g. an integer of 5,000 digits
        raise YamlSyntaxError(f"invalid YAML: {str(exc)[:200]}", None) from None
    finally:
        loader.dispose()
    return ParsedYaml(data=data, lines=walker.lines, problems=walker.problems)
