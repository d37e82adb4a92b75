"""A transaction cancelled at any point leaves the store usable: the next one begins and commits."""
from __future__ import annotations

import asyncio

from daemon.store.db import Store


async def test_a_transaction_cancelled_at_any_point_leaves_the_store_usable(tmp_path):
    store = await Store.open(tmp_path / "svc.db")
    await store.db.execute("CREATE TABLE marks (n INTEGER)")

    async def write(n: int) -> None:
        async with store.transaction() as tx:
            await tx.execute("INSERT INTO marks (n) VALUES (?)", (n,))

    try:
        for n in range(300):
            # Cancel after a varying number of loop turns, so BEGIN, the insert and COMMIT are each
            # caught in flight (aiosqlite finishes a statement in its thread even when cancelled).
            task = asyncio.create_task(write(n))
            for _ in range(n % 7):
                await asyncio.sleep(0)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await write(-1)
        assert not store.db.in_transaction
        async with store.db.execute("SELECT count(*) FROM marks WHERE n = -1") as cursor:
            assert (await cursor.fetchone())[0] == 1
    finally:
        await store.close()
