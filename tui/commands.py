"""The command palette (ctrl+p): every key binding of the current screen and of the app, plus the
screens to go to, as searchable commands. Built from the bindings themselves, so a new binding is
in the palette without another line of code."""
from __future__ import annotations

from functools import partial
from typing import Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider

NAVIGATION = [
    ("Go to: experiments", "The experiments dashboard", "goto('experiments')"),
    ("Go to: sandboxes", "Live sandboxes", "goto('sandboxes')"),
    ("Go to: launch", "Pick a spec and start an experiment", "goto('launch')"),
    ("Go to: watch", "Watch mode: re-run a spec on every change", "watch"),
    ("Help: keys of this screen", "Context help", "help"),
]


GENERIC = ("app.focus_", "screen.copy_text", "app.command_palette", "command_palette")  # inherited plumbing, not actions


class SvcCommands(Provider):
    def _commands(self) -> Iterator[tuple[str, str, object]]:
        screen = self.screen
        app = self.app
        seen: set[str] = set()
        title = getattr(screen, "CRUMB", "") or type(screen).__name__
        entries = [(screen, b) for bindings in screen._bindings.key_to_bindings.values() for b in bindings]
        for active in screen.active_bindings.values():
            if active.node is app or (active.node is not screen and active.binding.show):
                entries.append((active.node, active.binding))  # app keys, and e.g. the trace tree's own
        for node, binding in entries:
            if not binding.description or (node, binding.action) in seen or binding.action.startswith(GENERIC):
                continue
            seen.add((node, binding.action))
            scope = "App" if node is app else title
            display = binding.key_display or app.get_key_display(binding)
            yield (f"{scope}: {binding.description}", f"key {display}", partial(self._run, node, binding.action))
        for name, help_text, action in NAVIGATION:
            yield (name, help_text, partial(self._run, app, action))

    async def _run(self, node, action: str) -> None:
        await node.run_action(action)

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, text=name, help=help_text)
