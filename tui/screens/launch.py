"""Launch: pick a spec file (validation errors inline at their line), set name, replicas and
concurrency, see the matrix and the secrets it needs, and start — or watch it (re-run on change)."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, OptionList, Select, SelectionList, Static
from textual.widgets.option_list import Option

from client.api import ApiError, DaemonUnreachable
from client.spec_reports import last_report, one_line
from client.routes import R
from tui import format as f
from tui.backend import validate_offline
from tui.data import SpecIssueRow
from tui.screens.base import SvcScreen
from tui.spec_file import SpecFile
from tui.watch import ApiLauncher, InvalidSpec
from tui.widgets.spec_view import SpecView

SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", ".svc-home", ".pytest_cache"}


def find_specs(root: Path, limit: int = 200, depth: int = 3) -> list[Path]:
    """YAML files under `root` that look like specs (have `invariants:`), shallow first."""
    found: list[Path] = []

    def walk(directory: Path, level: int) -> None:
        if level > depth or len(found) >= limit:
            return
        try:
            entries = sorted(directory.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.is_file() and entry.suffix in (".yaml", ".yml"):
                try:
                    if "invariants:" in entry.read_text(encoding="utf-8", errors="replace")[:200_000]:
                        found.append(entry)
                except OSError:
                    pass
        for entry in entries:
            if entry.is_dir() and entry.name not in SKIP_DIRS and not entry.name.startswith("."):
                walk(entry, level + 1)

    walk(root, 0)
    return found[:limit]


class LaunchScreen(SvcScreen):
    CRUMB = "Launch"
    HELP = ("Type to filter the spec files (or a path), enter loads the first match; down moves into the list. "
            "Fix what validation shows, then ctrl+s starts (after you confirm), ctrl+w watches.")
    POLL_S = None
    BINDINGS = [
        Binding("ctrl+s", "start", "Start", priority=True),
        Binding("ctrl+w", "watch_spec", "Watch", priority=True),
        Binding("ctrl+r", "revalidate", "Validate", priority=True),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, root: Path | None = None) -> None:
        super().__init__()
        self.root = root or Path.cwd()
        self.spec: SpecFile | None = None
        self.issues: list[SpecIssueRow] = []
        self.validated = False
        self.dataset_versions: list[int] = []  # the spec's dataset's versions, newest first
        self.dataset_counts: dict[int, int] = {}  # version -> its record count
        self.dataset_problem = ""  # why the versions could not be read

    def compose(self) -> ComposeResult:
        yield from self.compose_top()
        yield Input(placeholder="type to filter the spec files, or a path (enter loads it)", id="spec-path", compact=True)
        with Horizontal(id="launch-main"):
            with Vertical(id="launch-left"):
                yield OptionList(id="spec-files")
                yield SelectionList(id="matrix", classes="hidden")
            with VerticalScroll(id="spec-scroll"):
                yield SpecView(id="spec-view")
        with Horizontal(id="launch-form"):
            yield Input(placeholder="name", id="name", compact=True)
            yield Input(placeholder="replicas", id="replicas", type="integer", compact=True)
            yield Input(placeholder="concurrency", id="concurrency", type="integer", compact=True)
            yield Select([], prompt="dataset version", id="dataset-version", compact=True, classes="hidden")
            yield Button("Start ^s", id="start", variant="primary", compact=True)
            yield Button("Watch ^w", id="watch", compact=True)
        yield Static("pick a spec file", id="launch-info", classes="detail")
        yield from self.compose_bottom()

    def on_mount(self) -> None:
        super().on_mount()
        self.found: list[Path] = []
        self.rescan()
        self.query_one("#spec-path", Input).focus()  # typing goes into the box, never to a shortcut

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.rescan()  # files made since the last visit

    def rescan(self) -> None:
        self.run_worker(self._scan, group="scan", exclusive=True, exit_on_error=False)

    async def _scan(self) -> None:
        import asyncio

        self.found = await asyncio.to_thread(find_specs, self.root)
        self.show_files()

    def label(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def show_files(self) -> None:
        """The spec files whose path contains what is typed in the box."""
        needle = self.query_one("#spec-path", Input).value.strip().lower()
        options = self.query_one("#spec-files", OptionList)
        options.clear_options()
        matching = [p for p in self.found if needle in self.label(p).lower() or needle in str(p).lower()]
        for path in matching:
            options.add_option(Option(f.plain(self.label(path)), id=str(path)))
        if not matching:
            options.add_option(Option(f.plain(f"no spec file under {self.root} matches “{needle}”" if needle
                                             else f"no spec files under {self.root}"), id="", disabled=True))
        else:
            options.highlighted = 0

    @on(Input.Changed, "#spec-path")
    def _path_typed(self) -> None:
        self.show_files()

    def on_key(self, event) -> None:
        """Down moves from the box into the list; a character typed in the list goes to the box."""
        box = self.query_one("#spec-path", Input)
        files = self.query_one("#spec-files", OptionList)
        if event.key == "down" and box.has_focus:
            files.focus()
        elif files.has_focus and event.is_printable and event.character:
            box.focus()
            box.insert_text_at_cursor(event.character)
        else:
            return
        event.stop()
        event.prevent_default()

    # --- choosing a file ----------------------------------------------------------------------------
    @on(OptionList.OptionSelected, "#spec-files")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self.query_one("#spec-path", Input).value = event.option.id
            self.choose(Path(event.option.id))

    @on(Input.Submitted, "#spec-path")
    def _typed(self, event: Input.Submitted) -> None:
        typed = event.value.strip()
        if not typed:
            self._load_highlighted()
            return
        path = Path(typed).expanduser()
        if not path.is_absolute() and not path.exists() and (self.root / path).exists():
            path = self.root / path
        if not path.exists():
            options = self.query_one("#spec-files", OptionList)
            option = options.get_option_at_index(options.highlighted) if options.highlighted is not None else None
            if option is not None and option.id:
                path = Path(option.id)  # what was typed filters the list: its first match
        self.choose(path)

    def _load_highlighted(self) -> None:
        options = self.query_one("#spec-files", OptionList)
        option = options.get_option_at_index(options.highlighted) if options.highlighted is not None else None
        if option is not None and option.id:
            self.query_one("#spec-path", Input).value = option.id
            self.choose(Path(option.id))

    def choose(self, path: Path) -> None:
        self.spec = SpecFile.read(path)
        self.issues, self.validated = [], False
        source = ""
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            self.issues = [SpecIssueRow(None, "", f"cannot read {path}: {exc.strerror or exc}")]
        self.query_one(SpecView).show(path, source, self.issues)
        self.query_one("#name", Input).placeholder = f"name (default: {self.spec.spec_id} vN · launch HH:MM)"
        self.query_one("#replicas", Input).placeholder = f"replicas ({self.spec.replicas})"
        self.show_dataset()
        self.show_matrix()
        self.render_info()
        self.set_crumb(f"Launch ▸ {path.name}")
        if not self.issues:
            self.action_revalidate()

    def action_revalidate(self) -> None:
        if self.spec is not None:
            self.run_worker(self._validate(self.spec.path), group="validate", exclusive=True, exit_on_error=False)

    async def _validate(self, path: Path) -> list[SpecIssueRow]:
        issues = await validate_offline(path)
        self.issues, self.validated = issues, True
        source = path.read_text(encoding="utf-8") if path.exists() else ""
        view = self.query_one(SpecView)
        view.show(path, source, issues)
        if issues:
            self.query_one("#spec-scroll", VerticalScroll).scroll_to(y=max(0, view.first_issue_offset() - 3), animate=False)
        self.render_info()
        return issues

    def show_matrix(self) -> None:
        """The spec's matrix entries, all ticked: untick some to run only the others (space toggles)."""
        picker = self.query_one("#matrix", SelectionList)
        picker.clear_options()
        entries = self.spec.matrix if self.spec else []
        for i, entry in enumerate(entries):
            picker.add_option((f.plain(",".join(f"{k}={v}" for k, v in entry.items()) or "(empty)"), i, True))
        picker.border_title = "matrix (space)"
        picker.set_class(not entries, "hidden")

    def dataset(self) -> dict | None:
        """The spec's `parallelism.dataset` ({id, version?, tags?}), when it runs over one."""
        dataset = self.spec.parallelism.get("dataset") if self.spec else None
        return dataset if isinstance(dataset, dict) and dataset.get("id") else None

    def show_dataset(self) -> None:
        """A dataset spec: the version to run over is picked from the dataset's versions (preset to
        the spec's `version`, else the latest)."""
        picker = self.query_one("#dataset-version", Select)
        dataset = self.dataset()
        picker.set_class(dataset is None, "hidden")
        self.dataset_versions, self.dataset_problem = [], ""
        picker.set_options([])
        if dataset is not None:
            self.run_worker(self._load_versions(str(dataset["id"]), dataset.get("version")), group="versions",
                            exclusive=True, exit_on_error=False)

    async def _load_versions(self, dataset_id: str, pinned: object) -> None:
        try:
            page = await self.backend.client.call(R.LIST_DATASET_VERSIONS, query={"limit": 100}, dataset_id=dataset_id)
        except DaemonUnreachable:
            self.app.lost_connection()
            return
        except ApiError as exc:
            self.dataset_problem = f"dataset {dataset_id}: {exc.body.get('message') if isinstance(exc.body, dict) else exc}"
            self.render_info()
            return
        versions = page.get("items", [])
        self.dataset_versions = [v["version"] for v in versions]
        self.dataset_counts = {v["version"]: v["record_count"] for v in versions}
        picker = self.query_one("#dataset-version", Select)
        picker.set_options([(f"v{v['version']} · {v['record_count']} records" + (" (latest)" if i == 0 else ""), v["version"])
                            for i, v in enumerate(versions)])
        if self.dataset_versions:
            picker.value = pinned if pinned in self.dataset_versions else self.dataset_versions[0]
        self.render_info()

    def picked_version(self) -> int | None:
        value = self.query_one("#dataset-version", Select).value
        return value if isinstance(value, int) else None

    def chosen_matrix(self) -> list[dict] | None:
        """None = the spec's own matrix; a list = only the ticked entries."""
        entries = self.spec.matrix if self.spec else []
        if not entries:
            return None
        picked = sorted(self.query_one("#matrix", SelectionList).selected)
        return None if len(picked) == len(entries) else [entries[i] for i in picked]

    @on(SelectionList.SelectedChanged, "#matrix")
    def _matrix_changed(self) -> None:
        self.render_info()

    def render_info(self) -> None:
        info = self.query_one("#launch-info", Static)
        spec = self.spec
        if spec is None:
            info.update("pick a spec file")
            return
        variables = self.app.theme_variables
        text = Text()
        if self.issues:
            text.append(f"✗ {len(self.issues)} problem(s) — fix them and ctrl+r  ", style=f"bold {f.colour(variables, 'error')}")
        elif self.validated:
            text.append("✓ valid  ", style=f"bold {f.colour(variables, 'success')}")
        else:
            text.append("validating…  ", style="dim")
        replicas = self._int("#replicas") or spec.replicas
        chosen = self.chosen_matrix()
        entries = len(chosen) if chosen is not None else max(1, len(spec.matrix))
        text.append(f"spec {spec.spec_id}  {replicas} replica(s) × {entries} matrix entr{'y' if entries == 1 else 'ies'} = {replicas * entries} runs")
        if chosen == []:
            text.append("  (tick at least one matrix entry)", style=f"bold {f.colour(variables, 'error')}")
        dataset = self.dataset()
        if dataset is not None:
            version = self.picked_version() or dataset.get("version") or "latest"
            latest = " (latest)" if self.dataset_versions and version == self.dataset_versions[0] else ""
            text.append(f"\n× one scenario per record of dataset {dataset['id']} version {version}{latest}")
            if version in self.dataset_counts:
                text.append(f": {self.dataset_counts[version]} records")
            if self.dataset_problem:
                text.append(f"  ✗ {self.dataset_problem}", style=f"bold {f.colour(variables, 'error')}")
            if dataset.get("tags"):
                text.append(f" (tags {', '.join(map(str, dataset['tags']))})")
        checked = self.last_spec_check(spec.spec_id)
        if checked is not None:  # `svc spec check` (or eval --check-spec) of this spec, its last result
            text.append("\n" + one_line(checked), style=f.colour(variables, "success" if checked["ok"] else "error"))
        secrets = spec.secret_statuses()
        if secrets:
            text.append("\nsecrets: ")
            for s in secrets:
                text.append(f"{'✓' if s.ok else '✗'} {s.name} ", style=f.colour(variables, "success" if s.ok else "error"))
                text.append(f"({s.note})  ", style="dim")
        info.update(text)

    def last_spec_check(self, spec_id: str) -> dict | None:
        config = getattr(getattr(self.backend, "client", None), "config", None)
        return last_report(config.home, spec_id) if config is not None and spec_id else None

    @on(Input.Changed, "#replicas")
    @on(Select.Changed, "#dataset-version")
    def _replicas_changed(self) -> None:
        self.render_info()

    def _int(self, selector: str) -> int | None:
        raw = self.query_one(selector, Input).value.strip()
        return int(raw) if raw.isdigit() and int(raw) > 0 else None

    # --- starting -----------------------------------------------------------------------------------
    @on(Button.Pressed, "#start")
    def _start_pressed(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#watch")
    def _watch_pressed(self) -> None:
        self.action_watch_spec()

    def options(self) -> dict:
        return {"name": self.query_one("#name", Input).value.strip() or None, "replicas": self._int("#replicas"),
                "concurrency": self._int("#concurrency"), "matrix": self.chosen_matrix(),
                "dataset_version": self.picked_version() if self.dataset() else None}

    def action_start(self) -> None:
        if self.spec is None:
            self.notify("pick a spec file first", severity="warning")
            return
        if self.issues:
            self.notify(f"{len(self.issues)} problem(s) in {self.spec.path.name}; not started", severity="error")
            return
        if not self.online("start"):
            return
        path = self.spec.path
        self.confirm(f"Start an experiment of {path.name} ({self.planned_runs()} runs)?",
                     lambda: self.run_worker(self._start(path), group="start", exclusive=True, exit_on_error=False))

    def planned_runs(self) -> int:
        spec = self.spec
        if spec is None:
            return 0
        chosen = self.chosen_matrix()
        return (self._int("#replicas") or spec.replicas) * (len(chosen) if chosen is not None else max(1, len(spec.matrix)))

    async def _start(self, path: Path) -> None:
        issues = await self._validate(path)
        if issues:
            self.notify(f"{len(issues)} problem(s) in {path.name}; not started", severity="error")
            return
        if self.chosen_matrix() == []:
            self.notify("every matrix entry is unticked; not started", severity="error")
            return
        launcher = ApiLauncher(self.backend.client, origin="launch", **self.options())
        try:
            experiment_id = await launcher.start(path)
        except InvalidSpec as exc:
            self.issues = exc.issues or [SpecIssueRow(None, "", str(exc))]
            self.query_one(SpecView).show(path, path.read_text(encoding="utf-8"), self.issues)
            self.render_info()
            self.notify(str(exc), title="not started", severity="error")
            return
        except DaemonUnreachable:
            self.app.lost_connection()
            return
        except ApiError as exc:
            self.app.report_error(exc, "start")
            return
        self.notify(f"started {experiment_id}", timeout=3)
        from tui.screens.experiment import ExperimentScreen

        self.app.action_goto("experiments")
        self.app.push_screen(ExperimentScreen(experiment_id))

    def action_watch_spec(self) -> None:
        if self.spec is None:
            self.notify("pick a spec file first", severity="warning")
            return
        if not self.online("watch"):
            return
        path, options = self.spec.path, self.options()
        self.confirm(f"Watch {path.name}: start an experiment now and again on every change?",
                     lambda: self.app.start_watch(path, **options))

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1 and self.app.screen_stack[0] is not self:
            self.app.pop_screen()  # opened over another screen: back to it
        else:
            self.app.action_home()
