"""Spec fixtures applied during boot (step `fixtures`): inline or uploaded SQL run with psql in a
postgres service, and files uploaded with the spec version (blobs) written into the workspace. The
daemon never reads a fixture path on its own host."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from daemon.sandbox import workspace as ws
from daemon.sandbox.engine import SandboxDriver
from daemon.sandbox.host_workspace import HostWorkspace
from daemon.sandbox.models import BootFailure
from daemon.sandbox.runtime import SandboxRuntime, tail

if TYPE_CHECKING:
    from daemon.spec.services import Fixture



class FixtureHost(Protocol):
    """What applying fixtures uses of the sandbox manager (boot.BootHost extends it)."""

    settings: Any
    store: Any
    driver: SandboxDriver
    workspaces: HostWorkspace

    def status(self, sb: SandboxRuntime, **data: object) -> None: ...


async def apply_fixture(manager: FixtureHost, sb: SandboxRuntime, index: int, fixture: Fixture) -> None:
    """Apply spec fixture `index`: SQL into a postgres service, or uploaded files into the workspace."""
    if hasattr(fixture, "service"):
        plan = next((p for p in sb.plans if p.name == fixture.service), None)
        if plan is None or plan.type != "postgres":
            raise BootFailure("fixtures", f"fixture {index}: service '{fixture.service}' is not a postgres service of this sandbox")
        if hasattr(fixture, "sql"):
            sql, origin = fixture.sql, "inline sql"
        else:
            _, entries = await fixture_blobs(manager, sb, index, fixture.path, single=True)
            try:
                sql = entries[0][1].decode("utf-8")
            except UnicodeDecodeError:
                raise BootFailure("fixtures", f"fixture {index} ({fixture.path}): the SQL file is not UTF-8 text")
            origin = str(fixture.path)
        container = sb.services[plan.name].id
        target = f"/tmp/svc-fixture-{index}.sql"
        await manager.driver.put_file(container, target, sql.encode())
        raw = await manager.driver.exec(container, ["psql", "-v", "ON_ERROR_STOP=1", "-X", "-q", "-U", plan.user or "postgres",
                                                    "-d", plan.database or "postgres", "-f", target], watchdog_s=300)
        if raw.exit_code != 0:
            err = (raw.stderr or raw.stdout).decode("utf-8", "replace").strip()
            raise BootFailure("fixtures", f"fixture {index} ({origin}) failed on service '{plan.name}': "
                                          f"{tail(err, 1500) or f'psql exited with {raw.exit_code}'}")
        manager.status(sb, step="fixture_applied", index=index, service=plan.name)
    else:
        name, entries = await fixture_blobs(manager, sb, index, fixture.path, single=False)
        try:
            await manager.workspaces.fixture(sb.workspace, entries, name, fixture.to)
        except ws.PathError as exc:
            raise BootFailure("fixtures", f"fixture {index} ({fixture.path}): {exc}")
        manager.status(sb, step="fixture_applied", index=index, path=str(fixture.path))


async def fixture_blobs(manager: FixtureHost, sb: SandboxRuntime, index: int, raw: str,
                        single: bool) -> tuple[str | None, list[tuple[str, bytes, int]]]:
    """The content of a `path:` fixture, from the files uploaded with the spec version (blobs);
    never from the daemon's host. Returns (file name, [(path, bytes, mode)]) for one file, or
    (None, [(path under the directory, bytes, mode), ...]) for a directory."""
    from daemon.agents.blobs import Blobs
    from daemon.spec.services import fixture_path_key
    from daemon.store import specs as spec_store

    if sb.fixture_files is None:
        sb.fixture_files = {}
        if sb.spec_id and sb.spec_version:
            sb.fixture_files = await spec_store.files(manager.store, sb.tenant_id, sb.spec_id, sb.spec_version)
    try:
        key = fixture_path_key(raw)
    except ValueError as exc:
        raise BootFailure("fixtures", f"fixture {index}: {exc}")
    if key in sb.fixture_files:
        chosen, name = [(key, key.rsplit("/", 1)[-1])], key.rsplit("/", 1)[-1]
    elif not single:
        chosen = [(p, p if key == "." else p[len(key) + 1:]) for p in sorted(sb.fixture_files)
                  if key == "." or p.startswith(key + "/")]
        name = None
    else:
        chosen, name = [], None
    if not chosen:
        where = f"spec '{sb.spec_id}' version {sb.spec_version}" if sb.spec_id else "this sandbox (it has no stored spec)"
        raise BootFailure("fixtures", (
            f"fixture {index}: file '{raw}' was not uploaded with {where}; the daemon never reads fixture paths on its "
            "own host: upload the spec with the svc CLI (`svc specs upload SPEC.yaml`), which sends the files"))
    blobs = Blobs(manager.settings.blobs_dir)

    def read() -> list[tuple[str, bytes, int]]:
        out = []
        for path, rel in chosen:
            info = sb.fixture_files[path]  # type: ignore[index]
            try:
                data = blobs.path(info["digest"]).read_bytes()
            except (OSError, ValueError) as exc:
                raise BootFailure("fixtures", f"fixture {index} ({raw}): the uploaded file '{path}' is missing from "
                                              f"the blob store ({type(exc).__name__}); upload the spec again")
            out.append((rel, data, int(info.get("mode") or 0o644) & 0o777))
        return out

    return name, await asyncio.to_thread(read)
