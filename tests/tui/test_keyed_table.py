"""Every table of the TUI (KeyedTable) shows a plain-string cell as data: a sandbox's image, a spec id
or a node name a tenant or an agent chose is neither parsed as markup nor sends its control
characters to the terminal."""
from __future__ import annotations

from textual.app import App, ComposeResult

from tui.widgets.keyed_table import KeyedTable

HOSTILE = "img\x1b[2J[bold]x[/bold]"


class OneTable(App):
    def compose(self) -> ComposeResult:
        yield KeyedTable([("image", "Image", None)], id="t")


async def test_a_string_cell_shows_its_control_characters_and_markup_as_typed():
    app = OneTable()
    async with app.run_test(size=(60, 5)) as pilot:
        table = app.query_one(KeyedTable)
        table.sync([("row", (HOSTILE,))])
        await pilot.pause()
        assert table.get_cell("row", "image").plain == "img\\x1b[2J[bold]x[/bold]"
