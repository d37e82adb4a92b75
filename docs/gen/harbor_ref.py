"""docs/reference/harbor.md: the Harbor task compatibility table, from daemon/tasks/harbor.py
(KEY_DOCS for the mapped task.toml keys, UNMAPPED_DOCS for Harbor's keys svc does not map, FILE_DOCS
for the task's files and directories)."""
from __future__ import annotations

import refcommon as common


def _key(key: tuple[str, ...]) -> str:
    return f"`{key[0]}`" if len(key) == 1 else f"`[{key[0]}] {key[1]}`"


def render() -> str:
    from daemon.tasks import harbor

    lines = [common.header("harbor_ref.py"), "# Harbor task compatibility", "",
             "What `svc eval run TASK_DIR --oracle`, `svc tasks run` and `svc tasks import` do with each part of a "
             "[Harbor](https://harborframework.com) task ([how-to](../how-to/harbor-tasks.md)). Any other key is "
             "named per task as not mapped, never dropped silently.", "",
             "## Files and directories", "", "| path | svc |", "|---|---|"]
    lines += [f"| `{path}` | {common.cell(text)} |" for path, text in harbor.FILE_DOCS.items()]
    lines += ["", "## task.toml keys", "", "| key | status | svc |", "|---|---|---|"]
    rows = [(key, "mapped", text) for key, text in harbor.KEY_DOCS.items()]
    rows += [(key, "not mapped", text) for key, text in harbor.UNMAPPED_DOCS.items()]
    lines += [f"| {_key(key)} | {status} | {common.cell(text)} |" for key, status, text in sorted(rows)]
    return "\n".join(lines) + "\n"
