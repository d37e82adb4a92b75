"""The audit event stream (file writes, db writes, http calls, process spawns, stdout, warnings):
appended live, filterable by type, warnings coloured, with a cursor to point at one event.

A line-based ScrollView with a strip cache (the toolong approach): appending 100 events a second
renders only the new lines, where a DataTable would re-render every visible cell each time."""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tui import format as f
from tui.data import AUDIT_TYPES, AuditRow

FILTERS = ("all", *AUDIT_TYPES)
SHORT = {"file_write": "file", "db_write": "db", "http_call": "http", "process_spawn": "proc", "stdout": "out", "warning": "warn"}
CACHE_LINES = 4000


class AuditLog(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    AuditLog { height: 1fr; }
    AuditLog > .audit-log--cursor {
        background: $block-cursor-blurred-background;
    }
    AuditLog:focus > .audit-log--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    AuditLog > .audit-log--time { color: $text-muted; }
    AuditLog > .audit-log--type { color: $accent; }
    AuditLog > .audit-log--warning { color: $warning; }
    AuditLog > .audit-log--header { text-style: bold; color: $text-muted; }
    """
    COMPONENT_CLASSES = {"audit-log--cursor", "audit-log--time", "audit-log--type", "audit-log--warning", "audit-log--header"}
    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "move(-20)", "Page up", show=False),
        Binding("pagedown", "move(20)", "Page down", show=False),
        Binding("home,g", "jump(0)", "First", show=False),
        Binding("end,G", "jump(-1)", "Last (follow)", show=False),
        Binding("j", "move(1)", "Down", show=False),
        Binding("k", "move(-1)", "Up", show=False),
    ]

    cursor: reactive[int] = reactive(-1, init=False)  # position in `shown`

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.events: list[AuditRow] = []
        self.shown: list[int] = []  # positions in `events` that pass the filter (not `visible`: a Widget property)
        self.type_filter = "all"
        self.needle = ""  # text the shown events contain (`/` in the run view)
        self._cache: OrderedDict[tuple, Strip] = OrderedDict()
        self._styles: dict[str, Style] = {}

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _t: self._restyle())

    # --- data ---------------------------------------------------------------------------------------
    def load(self, rows: Iterable[AuditRow]) -> None:
        self.events = list(rows)
        self.refilter()

    def append(self, rows: Iterable[AuditRow]) -> None:
        following = self.cursor < 0 or self.cursor >= len(self.shown) - 1
        start = len(self.events)
        self.events.extend(rows)
        self.shown.extend(i for i in range(start, len(self.events)) if self._passes(self.events[i]))
        self._resize()
        if following and self.shown:
            self.cursor = len(self.shown) - 1  # tail -f, unless the user moved up
        self.refresh()

    def _passes(self, row: AuditRow) -> bool:
        return ((self.type_filter == "all" or row.type == self.type_filter)
                and (not self.needle or self.needle in f"{row.type} {row.summary}".lower()))

    def filter_text(self, needle: str) -> None:
        self.needle = needle.lower().strip()
        self.refilter()

    def refilter(self) -> None:
        self.shown = [i for i, row in enumerate(self.events) if self._passes(row)]
        self._cache.clear()
        self._resize()
        self.cursor = min(max(self.cursor, 0), len(self.shown) - 1) if self.shown else -1
        self.refresh()

    def cycle_filter(self) -> None:
        self.type_filter = FILTERS[(FILTERS.index(self.type_filter) + 1) % len(FILTERS)]
        self.refilter()

    @property
    def selected(self) -> AuditRow | None:
        return self.events[self.shown[self.cursor]] if 0 <= self.cursor < len(self.shown) else None

    def reveal(self, index: int) -> None:
        """Put the cursor on the event whose `index` is given (clearing a filter that hides it)."""
        position = next((p for p, i in enumerate(self.shown) if self.events[i].index == index), None)
        if position is None:
            self.type_filter, self.needle = "all", ""
            self.refilter()
            position = next((p for p, i in enumerate(self.shown) if self.events[i].index == index), None)
        if position is not None:
            self.cursor = position
        self.focus()

    # --- rendering ----------------------------------------------------------------------------------
    def _resize(self) -> None:
        """Grow the scrollable height (+1: the header line). While the vertical scrollbar stays as it
        is, skip the layout pass a `virtual_size` change normally costs (the whole screen reflows
        and repaints): only this widget and its scrollbar need it."""
        size = Size(self.size.width, len(self.shown) + 1)
        if size == self.virtual_size:
            return
        height = self.container_size.height
        same_bars = self.size.width and (size.height > height) == (self.virtual_size.height > height) and self.show_vertical_scrollbar == (size.height > height)
        if same_bars and hasattr(self, "_scroll_update"):
            self.set_reactive(AuditLog.virtual_size, size)
            self._scroll_update(size)
            self.refresh()
        else:
            self.virtual_size = size

    def on_resize(self) -> None:
        self._cache.clear()
        self._resize()

    def _restyle(self) -> None:
        self._cache.clear()
        self._styles.clear()
        self.refresh()

    def _style(self, name: str) -> Style:
        """Component styles, looked up once per theme/focus change rather than once per line."""
        key = f"{name}|{self.has_focus}"
        style = self._styles.get(key)
        if style is None:
            style = self._styles[key] = self.rich_style if name == "base" else self.get_component_rich_style(name)
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y == 0:
            return self._header(width)
        position = int(self.scroll_offset.y) + y - 1
        if position >= len(self.shown):
            return Strip.blank(width, self._style("base"))
        key = (self.shown[position], width, position == self.cursor, self.has_focus)
        strip = self._cache.get(key)
        if strip is None:
            strip = self._line(self.events[self.shown[position]], width, position == self.cursor)
            self._cache[key] = strip
            if len(self._cache) > CACHE_LINES:
                self._cache.popitem(last=False)
        return strip

    def _header(self, width: int) -> Strip:
        style = self._style("audit-log--header")
        needle = f" “{self.needle}”" if self.needle else ""
        label = f" {'Time':<8}  {'Type':<4}  Event   (filter: {self.type_filter}{needle}; a cycles, / searches)"
        return Strip([Segment(label[:width].ljust(width), style)])

    def _line(self, row: AuditRow, width: int, is_cursor: bool) -> Strip:
        base = self._style("base")
        warn = self._style("audit-log--warning") if row.is_warning else Style()
        segments = [
            Segment(" "),
            Segment(f"{f.clock(row.ts):<8}  ", self._style("audit-log--time")),
            Segment(f"{SHORT.get(row.type, row.type[:4]):<4}  ", warn or self._style("audit-log--type")),
            Segment(f.truncate(row.summary, max(1, width - 17)), warn),
        ]
        strip = Strip(segments).crop_extend(0, width, base).apply_style(base)
        if is_cursor:
            strip = strip.apply_style(self._style("audit-log--cursor"))
        return strip

    # --- cursor -------------------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self._cache = OrderedDict((k, v) for k, v in self._cache.items() if k[0] not in self._positions(old, new))
        if new >= 0:
            self.scroll_to_region(Region(0, new, 1, 2), animate=False, force=True)
        self.refresh()

    def _positions(self, *cursor_positions: int) -> set[int]:
        return {self.shown[p] for p in cursor_positions if 0 <= p < len(self.shown)}

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def action_move(self, delta: int) -> None:
        if self.shown:
            self.cursor = max(0, min(len(self.shown) - 1, (self.cursor if self.cursor >= 0 else 0) + delta))

    def action_jump(self, where: int) -> None:
        if self.shown:
            self.cursor = len(self.shown) - 1 if where < 0 else where

    def on_click(self, event: events.Click) -> None:
        position = int(self.scroll_offset.y) + event.y - 1
        if 0 <= position < len(self.shown):
            self.cursor = position
