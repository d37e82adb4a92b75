"""The sandbox boot pipeline's shape (no Docker): named steps in order over one BootContext, the
first BootFailure stops it, and a BootExtension's hooks all exist and do nothing by default."""
from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import pytest

from daemon.sandbox import boot
from daemon.sandbox.boot import STEPS, BootContext, BootExtension, run_boot
from daemon.sandbox.models import BootFailure
from daemon.sandbox.network import SandboxPolicyExtension


def test_steps_are_named_async_functions_in_boot_order():
    assert [s.__name__ for s in STEPS] == [
        "resolve_secrets", "check_images", "make_workspace", "create_network", "seed_workspace", "prepare_agent",
        "start_containers", "apply_fixtures", "open_services", "check_required_env", "extract_bundle", "run_setup", "mark_ready",
    ]
    for step in STEPS:
        assert inspect.iscoroutinefunction(step) and list(inspect.signature(step).parameters) == ["ctx"]


def test_run_boot_stops_at_the_first_failure_and_shares_one_context():
    seen: list[tuple[str, int]] = []

    async def first(ctx: BootContext) -> None:
        seen.append(("first", id(ctx)))

    async def failing(ctx: BootContext) -> None:
        seen.append(("failing", id(ctx)))
        raise BootFailure("network", "no")

    async def never(ctx: BootContext) -> None:
        seen.append(("never", id(ctx)))

    with pytest.raises(BootFailure) as info:
        asyncio.run(run_boot(SimpleNamespace(sb=SimpleNamespace(boot_steps_ms={})), [first, failing, never]))  # type: ignore[arg-type]
    assert (info.value.step, info.value.message) == ("network", "no")
    assert [name for name, _ in seen] == ["first", "failing"] and seen[0][1] == seen[1][1]


def test_extension_hooks_default_to_nothing():
    ext = BootExtension()

    async def call_all() -> list:
        return [await ext.create_network(None, None), await ext.on_network(None, None, None),  # type: ignore[arg-type]
                await ext.on_service(None, None, None, None), await ext.on_ready(None, None),  # type: ignore[arg-type]
                await ext.on_destroy(None, None)]  # type: ignore[arg-type]

    assert asyncio.run(call_all()) == [False, None, None, None, None]
    assert issubclass(SandboxPolicyExtension, BootExtension)


def test_boot_does_not_import_the_api_layer():
    source = inspect.getsource(boot)
    assert "daemon.api" not in source
