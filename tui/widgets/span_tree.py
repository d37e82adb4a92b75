"""The trace tree: LLM calls (model, tokens, cost, latency) and tool calls, errors highlighted.

Lazy: only the children of expanded nodes exist as tree nodes, and wide levels are shown in chunks
("… 9,800 more" loads the next chunk), so a 10,000-span trace opens instantly and stays smooth
while events stream in."""
from __future__ import annotations

from typing import Iterable

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tui import format as f
from tui.data import Span, TraceItem
from tui.trace_index import TraceIndex

CHUNK = 200
MORE = "more:"
ICONS = {"llm_call": "◆", "tool_call": "▸", "tool_use": "◇"}


class SpanTree(Tree[str]):
    BINDINGS = [
        Binding("n", "next_error", "Next error"),
        Binding("E", "expand_errors", "Expand errors"),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g,home", "scroll_home", "First", show=False),
        Binding("G,end", "scroll_end", "Last", show=False),
    ]

    class SpanSelected(Message):
        def __init__(self, span: Span | None) -> None:
            super().__init__()
            self.span = span

    def __init__(self, **kwargs) -> None:
        super().__init__("trace", **kwargs)
        self.show_root = False
        self.index = TraceIndex()
        self._span_nodes: dict[str, TreeNode[str]] = {}
        self._populated: set[str] = set()  # span ids (and "" for the root) whose children exist
        self._shown: dict[str, int] = {}  # how many children of a parent are materialised

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _t: self.relabel())

    # --- loading --------------------------------------------------------------------------------
    def load(self, events: Iterable[TraceItem]) -> None:
        """Replace the whole trace."""
        self.index = TraceIndex()
        self.index.extend(events)
        self.clear()
        self._span_nodes.clear()
        self._populated = {""}
        self._shown = {}
        self._materialise(self.root, "", self.index.roots())

    def add_events(self, events: Iterable[TraceItem]) -> int:
        """Merge live events; touches only nodes that are on screen. Returns new spans."""
        new_spans = 0
        for event in events:
            span_id, new = self.index.add(event)
            new_spans += new
            if not new:
                node = self._span_nodes.get(span_id)
                if node is not None:
                    node.set_label(self.label_for(span_id))
                self._refresh_ancestors(span_id)
                continue
            parent = "" if self.index.is_root_level(span_id) else self.index.spans[span_id].parent_id
            if parent in self._populated:
                parent_node = self.root if parent == "" else self._span_nodes[parent]
                if self._shown.get(parent, 0) < CHUNK or self._more_node(parent_node) is None:
                    self._add_span_node(parent_node, span_id)
                    self._shown[parent] = self._shown.get(parent, 0) + 1
                else:
                    self._update_more(parent_node, parent)
            elif parent in self._span_nodes:
                self._span_nodes[parent].allow_expand = True
                self._span_nodes[parent].set_label(self.label_for(parent))
            self._refresh_ancestors(span_id)
        return new_spans

    def _refresh_ancestors(self, span_id: str) -> None:
        if span_id not in self.index.error_below:
            return
        for ancestor in self.index.path_to(span_id)[:-1]:
            node = self._span_nodes.get(ancestor)
            if node is not None:
                node.set_label(self.label_for(ancestor))

    def _materialise(self, parent_node: TreeNode[str], parent: str, kids: list[str]) -> None:
        start = self._shown.get(parent, 0)
        chunk = kids[start:start + CHUNK]
        more = self._more_node(parent_node)
        if more is not None:
            more.remove()
        for span_id in chunk:
            self._add_span_node(parent_node, span_id)
        self._shown[parent] = start + len(chunk)
        self._update_more(parent_node, parent, kids)

    def _update_more(self, parent_node: TreeNode[str], parent: str, kids: list[str] | None = None) -> None:
        kids = kids if kids is not None else (self.index.roots() if parent == "" else self.index.kids(parent))
        left = len(kids) - self._shown.get(parent, 0)
        more = self._more_node(parent_node)
        if left <= 0:
            if more is not None:
                more.remove()
            return
        label = Text(f"… {left:,} more (enter to show {min(left, CHUNK)})", style="italic dim")
        if more is None:
            parent_node.add_leaf(label, data=MORE + parent)
        else:
            more.set_label(label)

    @staticmethod
    def _more_node(parent_node: TreeNode[str]) -> TreeNode[str] | None:
        children = parent_node.children
        if children and (children[-1].data or "").startswith(MORE):
            return children[-1]
        return None

    def _add_span_node(self, parent_node: TreeNode[str], span_id: str) -> TreeNode[str]:
        more = self._more_node(parent_node)
        node = parent_node.add(self.label_for(span_id), data=span_id, allow_expand=bool(self.index.kids(span_id)),
                               before=more if more is not None else None)
        self._span_nodes[span_id] = node
        return node

    def populate(self, node: TreeNode[str]) -> None:
        span_id = node.data or ""
        if span_id.startswith(MORE) or span_id in self._populated:
            return
        self._populated.add(span_id)
        self._materialise(node, span_id, self.index.kids(span_id))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[str]) -> None:
        event.stop()
        self.populate(event.node)

    def on_tree_node_selected(self, event: Tree.NodeSelected[str]) -> None:
        data = event.node.data or ""
        if data.startswith(MORE):
            event.stop()
            parent = data[len(MORE):]
            parent_node = self.root if parent == "" else self._span_nodes[parent]
            kids = self.index.roots() if parent == "" else self.index.kids(parent)
            self._materialise(parent_node, parent, kids)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        self.post_message(self.SpanSelected(self.index.spans.get(event.node.data or "")))

    # --- labels ---------------------------------------------------------------------------------
    def label_for(self, span_id: str) -> Text:
        """Icon and name, then what fits of (by priority) the error mark, latency, cost, tokens and
        model: a narrow tree drops the model before the latency, never the error."""
        span = self.index.spans[span_id]
        variables = self.app.theme_variables if self.is_attached else None
        err = f.colour(variables, "error")
        text = Text()
        text.append(ICONS.get(span.event_type, "•") + " ", style=err if span.is_error else f.colour(variables, "accent"))
        text.append(span.name, style=f"bold {err}" if span.is_error else "bold")
        parts: list[tuple[int, str, str]] = []  # (position in the label, text, style), most important first
        if span.is_error:
            parts.append((5, f"  ✗ {span.error_type or 'error'}", f"bold {err}"))
        elif span_id in self.index.error_below:
            parts.append((5, "  ⚠ error inside", err))
        if span.duration_ms is not None:
            parts.append((4, f"  {f.ms(span.duration_ms)}", "dim"))
        elif span.open:
            parts.append((4, "  running…", f.colour(variables, "accent")))
        if span.cost_usd:
            parts.append((3, f"  {f.money(span.cost_usd)}", ""))
        if span.input_tokens or span.output_tokens:
            parts.append((2, f"  {span.input_tokens or 0}→{span.output_tokens or 0} tok", "dim"))
        if span.model:
            parts.append((1, f"  {span.model}", "dim"))
        room = self.label_room(span_id) - text.cell_len
        kept = []
        for part in parts:
            if len(part[1]) <= room:
                kept.append(part)
                room -= len(part[1])
        for _position, label, style in sorted(kept):
            text.append(label, style=style)
        return text

    def label_room(self, span_id: str) -> int:
        """Columns a label of this span has: the tree's width less its guides (4 per level)."""
        width = self.size.width if self.is_attached and self.size.width else 200
        return width - 4 * len(self.index.path_to(span_id)) - 1

    def on_resize(self) -> None:
        self.relabel()

    def relabel(self) -> None:
        for span_id, node in self._span_nodes.items():
            node.set_label(self.label_for(span_id))

    # --- navigation ------------------------------------------------------------------------------
    def reveal(self, span_id: str) -> None:
        """Expand the path to a span, materialising chunks as needed, and put the cursor on it."""
        path = self.index.path_to(span_id)
        parent_node = self.root
        parent = ""
        for ancestor in path:
            kids = self.index.roots() if parent == "" else self.index.kids(parent)
            if parent not in self._populated:
                self._populated.add(parent)
                self._materialise(parent_node, parent, kids)
            while ancestor not in self._span_nodes and self._shown.get(parent, 0) < len(kids):
                self._materialise(parent_node, parent, kids)
            node = self._span_nodes.get(ancestor)
            if node is None:
                return
            if ancestor != span_id:
                node.expand()
            parent_node, parent = node, ancestor
        self._invalidate()
        self.call_after_refresh(self._move_to, span_id)

    def _move_to(self, span_id: str) -> None:
        node = self._span_nodes.get(span_id)
        if node is not None:
            self.move_cursor(node, animate=False)
            self.call_after_refresh(self.scroll_to_node, node, animate=False)

    def action_next_error(self) -> None:
        current = self.cursor_node.data if self.cursor_node else None
        first = None
        passed_current = current is None or current not in self.index.spans
        for span_id in self.index.walk():
            if span_id == current:
                passed_current = True
                continue
            if self.index.spans[span_id].is_error:
                if passed_current:
                    self.reveal(span_id)
                    return
                first = first or span_id
        if first is None:
            self.notify("no errors in this trace")
        else:
            self.reveal(first)

    def action_expand_errors(self) -> None:
        for span_id in [s for s in self.index.walk() if self.index.spans[s].is_error][:50]:
            self.reveal(span_id)
