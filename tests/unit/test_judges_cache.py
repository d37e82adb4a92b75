"""The judge cache keeps the newest verdicts of each tenant (daemon/store/judges.py prune_cache)."""
from __future__ import annotations

import pytest

from daemon.store import judges as repo
from daemon.store.db import Store


@pytest.fixture
async def store(tmp_path):
    db = await Store.open(tmp_path / "svc.db")
    for tenant, count in (("t1", 5), ("t2", 2)):
        for i in range(count):
            await db.execute("INSERT INTO judge_cache (tenant_id, key, score, label, reason, created_at) VALUES (?, ?, 1, NULL, '', ?)",
                             (tenant, f"k{i}", f"2026-01-0{i + 1}T00:00:00.000Z"))
    yield db
    await db.close()


async def test_pruning_keeps_the_newest_verdicts_of_each_tenant(store):
    await repo.prune_cache(store, keep_per_tenant=3)
    rows = await store.fetchall("SELECT tenant_id, key FROM judge_cache ORDER BY tenant_id, key")
    assert [(r["tenant_id"], r["key"]) for r in rows] == [("t1", "k2"), ("t1", "k3"), ("t1", "k4"), ("t2", "k0"), ("t2", "k1")]


async def test_a_pruned_verdict_is_no_longer_a_hit(store):
    await repo.prune_cache(store, keep_per_tenant=3)
    assert await repo.cached(store, "t1", "k0") is None
