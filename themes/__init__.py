"""The bundled TUI themes (NAME.toml + NAME.tcss); installed as the package tui.bundled_themes."""
