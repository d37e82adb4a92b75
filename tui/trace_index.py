"""An index of trace events as a span tree: start/end events merged per span, children per parent,
and which spans have an error at or below them. Pure data, no widgets: the span tree widget
materialises only the parts a user expands."""
from __future__ import annotations

from typing import Iterable, Iterator

from tui.data import Span, TraceItem


class TraceIndex:
    def __init__(self) -> None:
        self.spans: dict[str, Span] = {}
        self.children: dict[str, list[str]] = {}
        self.error_below: set[str] = set()
        self.totals = {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0, "llm_calls": 0, "tool_calls": 0, "errors": 0}
        self._counted: set[str] = set()

    def __len__(self) -> int:
        return len(self.spans)

    def add(self, event: TraceItem) -> tuple[str, bool]:
        """Merge one event (TraceEvent or Span); returns (span_id, whether the span is new)."""
        span_id = event.span_id
        span = self.spans.get(span_id)
        new = span is None
        if new:
            span = Span(span_id=span_id)
            self.spans[span_id] = span
        span.merge(event)
        if new:
            self.children.setdefault(span.parent_id, []).append(span_id)
        if span.is_error:
            self._mark_error(span_id)
        self._count(span)
        return span_id, new

    def extend(self, events: Iterable[TraceItem]) -> None:
        for event in events:
            self.add(event)

    def _count(self, span: Span) -> None:
        if span.open or span.span_id in self._counted:
            return
        self._counted.add(span.span_id)
        self.totals["cost_usd"] += span.cost_usd or 0.0
        self.totals["input_tokens"] += span.input_tokens or 0
        self.totals["output_tokens"] += span.output_tokens or 0
        self.totals["llm_calls"] += span.event_type == "llm_call"
        self.totals["tool_calls"] += span.event_type == "tool_call"
        self.totals["errors"] += span.is_error

    def _mark_error(self, span_id: str) -> None:
        current: str | None = span_id
        while current and current not in self.error_below:
            self.error_below.add(current)
            parent = self.spans.get(current)
            current = parent.parent_id if parent else None

    def roots(self) -> list[str]:
        """Top-level spans, plus spans whose parent never arrived (so nothing is invisible)."""
        out = list(self.children.get("", []))
        for parent, kids in self.children.items():
            if parent and parent not in self.spans:
                out.extend(kids)
        return out

    def kids(self, span_id: str) -> list[str]:
        return self.children.get(span_id, [])

    def is_root_level(self, span_id: str) -> bool:
        parent = self.spans[span_id].parent_id
        return not parent or parent not in self.spans

    def path_to(self, span_id: str) -> list[str]:
        """Ancestors from the top down to `span_id` itself."""
        path = []
        current: str | None = span_id
        seen: set[str] = set()
        while current and current in self.spans and current not in seen:
            seen.add(current)
            path.append(current)
            current = self.spans[current].parent_id
        return list(reversed(path))

    def walk(self) -> Iterator[str]:
        """Depth-first order, the order the tree shows spans in."""
        stack = list(reversed(self.roots()))
        seen: set[str] = set()
        while stack:
            span_id = stack.pop()
            if span_id in seen:
                continue
            seen.add(span_id)
            yield span_id
            stack.extend(reversed(self.kids(span_id)))
