"""The command palette (ctrl+p) and the `:` jump line.

The palette finds experiments, runs and specs by name first (what a user looking for something
types), then every key binding of the current screen and of the app, then the screens, themes and
daemon commands. Built from the bindings themselves, so a new binding is in the palette without
another line of code. One provider, so the order of its parts is ours, not Textual's."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Iterator

from textual.command import DiscoveryHit, Hit, Hits, Provider

from client.routes import R

NAVIGATION = [
    ("Go to: experiments", "The experiments dashboard", "goto('experiments')"),
    ("Go to: sandboxes", "Live sandboxes", "goto('sandboxes')"),
    ("Go to: launch", "Pick a spec and start an experiment", "goto('launch')"),
    ("Go to: watch", "Watch mode: re-run a spec on every change", "watch"),
    ("Help: keys of this screen", "Context help", "help"),
]

GENERIC = ("app.focus_", "screen.copy_text", "app.command_palette", "command_palette")  # inherited plumbing, not actions
OTHERS_WEIGHT = 0.6  # keys and app commands rank below a thing found by name


@dataclass
class Found:
    """Something the user can open by name: an experiment, a run or a spec."""
    kind: str
    key: str
    title: str
    help: str


async def find_things(app: Any, limit: int = 200) -> list[Found]:
    """Experiments (newest first), recent runs and specs, as the daemon lists them. Offline: []."""
    backend = app.backend
    found: list[Found] = []
    try:
        for row in await backend.experiments():
            found.append(Found("exp", row.id, f"Experiment: {row.name or row.id}", f"{row.id}  spec {row.spec_id}  {row.status}"))
        runs = await backend.call(R.LIST_RUNS, query={"limit": limit})
        for run in runs.get("items", []):
            found.append(Found("run", run["id"], f"Run: {run['id']}", f"spec {run.get('spec_id')}  {run.get('verdict') or run.get('status')}"))
        specs = await backend.call(R.LIST_SPECS, query={"limit": limit})
        for spec in specs.get("items", []):
            name = spec.get("name") or spec.get("id")
            found.append(Found("spec", str(name), f"Spec: {name}", f"v{spec.get('version')}: its experiments on the dashboard"))
    except Exception:  # the palette still offers keys and screens while the daemon is away
        pass
    return found


def open_found(app: Any, kind: str, key: str) -> None:
    """Open an experiment or run by id, or the dashboard filtered to a spec's experiments."""
    if kind == "exp":
        from tui.screens.experiment import ExperimentScreen

        app.push_screen(ExperimentScreen(key))
    elif kind == "run":
        from tui.screens.run import RunScreen

        app.push_screen(RunScreen(run_id=key))
    elif kind == "spec":
        app.action_home()
        dashboard = app.screen
        if hasattr(dashboard, "apply_filter"):
            dashboard.apply_filter(key)


class SvcCommands(Provider):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._found: list[Found] = []

    async def startup(self) -> None:
        self._found = await find_things(self.app)

    def _things(self) -> Iterator[tuple[str, str, Callable]]:
        for thing in self._found:
            yield thing.title, thing.help, partial(open_found, self.app, thing.kind, thing.key)

    def _commands(self) -> Iterator[tuple[str, str, Callable]]:
        screen = self.screen
        app = self.app
        seen: set = set()
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
        for command in app.get_system_commands(screen):
            yield (command.title, command.help, command.callback)

    async def _run(self, node, action: str) -> None:
        await node.run_action(action)

    async def discover(self) -> Hits:
        for name, help_text, callback in [*self._things(), *self._commands()]:
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for weight, source in ((1.0, self._things()), (OTHERS_WEIGHT, self._commands())):
            for name, help_text, callback in source:
                score = matcher.match(name)
                if score > 0:
                    yield Hit(score * weight, matcher.highlight(name), callback, text=name, help=help_text)


JUMP_HELP = ":exp NAME · :run ID · :spec NAME · :sandboxes · :launch · :watch · :help"


async def jump(app: Any, line: str) -> str | None:
    """Run one `:` command; returns what went wrong (shown to the user), None when done."""
    verb, _, arg = line.strip().lstrip(":").strip().partition(" ")
    verb, arg = verb.lower(), arg.strip()
    screens = {"sandboxes": "sandboxes", "sb": "sandboxes", "launch": "launch", "experiments": "experiments",
               "exps": "experiments", "dashboard": "experiments"}
    if verb in screens and not arg:
        app.action_home() if screens[verb] == "experiments" else app.action_goto(screens[verb])
        return None
    if verb == "watch":
        app.action_watch()
        return None
    if verb in ("help", "?"):
        return JUMP_HELP
    if verb in ("exp", "experiment", "run", "spec") and not arg:
        return f":{verb} needs a name or id ({JUMP_HELP})"
    if verb not in ("exp", "experiment", "run", "spec"):
        return f"unknown command :{verb} ({JUMP_HELP})"
    kind = "exp" if verb == "experiment" else verb
    things = [t for t in await find_things(app) if t.kind == kind]
    needle = arg.lower()
    exact = [t for t in things if needle in (t.key.lower(), t.title.split(": ", 1)[1].lower())]
    partial_ = [t for t in things if needle in t.title.lower() or needle in t.key.lower()]
    match = (exact or partial_ or [None])[0]
    if match is None and kind == "run" and arg.startswith("run_"):
        match = Found("run", arg, "", "")  # an older run than the list holds
    if match is None:
        return f"no {'experiment' if kind == 'exp' else kind} matches “{arg}”"
    open_found(app, kind, match.key)
    return None
