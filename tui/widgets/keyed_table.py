"""A DataTable kept in sync with a list of keyed rows without rebuilding it: new rows are added,
changed cells updated in place, vanished rows removed, and the cursor stays on the same row."""
from __future__ import annotations

from typing import Any, Sequence

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable
from textual.widgets.data_table import RowKey

from client.terminal import printable

try:  # private, but the only way to reorder without re-adding every row
    from textual._two_way_dict import TwoWayDict
except ImportError:  # pragma: no cover
    TwoWayDict = None  # type: ignore[assignment]

Column = tuple[str, str, int | None]  # key, label, width (None = auto)


def _same(a: Any, b: Any) -> bool:
    """Cell equality that sees style changes (rich's Text.__eq__ ignores the base style)."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and str(a.style) == str(b.style) and a.spans == b.spans
    return type(a) is type(b) and a == b


def _as_data(cell: Any) -> Any:
    """A `str` cell as data: never parsed as markup, its control characters shown, never sent."""
    return Text(printable(cell), end="") if isinstance(cell, str) else cell


# The movement keys every list, table and tree of the TUI shares (vim / k9s style).
VIM_TABLE = [
    Binding("j", "cursor_down", "Down", show=False),
    Binding("k", "cursor_up", "Up", show=False),
    Binding("g,home", "scroll_top", "First", show=False),
    Binding("G,end", "scroll_bottom", "Last", show=False),
]


class KeyedTable(DataTable):
    BINDINGS = VIM_TABLE
    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    KeyedTable.-collapsible.-empty { height: auto; }
    """

    def __init__(self, columns: Sequence[Column], *, collapse_when_empty: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", True)
        super().__init__(**kwargs)
        self._columns_spec = list(columns)
        self._cells: dict[str, tuple] = {}
        self._order: list[str] = []
        if collapse_when_empty:
            self.add_class("-collapsible", "-empty")

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        """A `str` cell is shown as typed (DataTable would parse it as markup): cells hold agent text."""
        return super().add_row(*(_as_data(c) for c in cells), **kwargs)

    def update_cell(self, row_key: Any, column_key: Any, value: Any, **kwargs: Any) -> None:
        super().update_cell(row_key, column_key, _as_data(value), **kwargs)

    def on_mount(self) -> None:
        for key, label, width in self._columns_spec:
            self.add_column(label, key=key, width=width)

    @property
    def keys(self) -> list[str]:
        return list(self._order)

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    def select_key(self, key: str) -> None:
        if key in self._cells:
            self.move_cursor(row=self.get_row_index(key))

    def sync(self, rows: Sequence[tuple[str, Sequence[Any]]]) -> tuple[int, int, int]:
        """Make the table show exactly `rows`, in that order. Returns (added, updated, removed)."""
        selected = self.selected_key
        wanted = dict(rows)
        removed = [k for k in self._order if k not in wanted]
        for key in removed:
            self.remove_row(key)
            del self._cells[key]
        added = updated = 0
        column_keys = [c[0] for c in self._columns_spec]
        for key, cells in rows:
            cells = tuple(cells)
            old = self._cells.get(key)
            if old is None:
                self.add_row(*cells, key=key)
                added += 1
            elif len(old) != len(cells) or not all(_same(a, b) for a, b in zip(old, cells)):
                for column, before, after in zip(column_keys, old, cells):
                    if not _same(before, after):
                        self.update_cell(key, column, after, update_width=False)
                updated += 1
            self._cells[key] = cells
        order = [k for k, _ in rows]
        if order != [k for k in self._row_keys_in_table()]:
            self._reorder(order)
        self._order = order
        self.set_class(not order and self.has_class("-collapsible"), "-empty")
        if selected in wanted:
            index = self.get_row_index(selected)
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)
        return added, updated, len(removed)

    def _row_keys_in_table(self) -> list[str]:
        return [row.key.value for row in self.ordered_rows]

    def _reorder(self, order: list[str]) -> None:
        if TwoWayDict is None:  # pragma: no cover
            self.sort(key=lambda cells: 0)
            return
        self._row_locations = TwoWayDict({RowKey(k): i for i, k in enumerate(order)})
        self._update_count += 1
        self.refresh()

    def clear_rows(self) -> None:
        self.clear()
        self._cells.clear()
        self._order = []
