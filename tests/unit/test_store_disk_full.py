"""A store write that finds the disk full waits for room instead of failing (daemon/store/db.py): a
job's end or a verdict written a little late is not lost, and an experiment never stays running for
want of one write. The full disk is SQLite's own (PRAGMA max_page_count), on a real database file."""
from __future__ import annotations

import asyncio

from daemon.store import db as store_db
from daemon.store.db import Store


async def test_a_write_on_a_full_store_lands_once_there_is_room(tmp_path):
    store = await Store.open(tmp_path / "svc.db")
    try:
        await store.execute("CREATE TABLE blobs (data BLOB)")
        pages = (await store.fetchone("PRAGMA page_count"))[0]
        await store.db.execute(f"PRAGMA max_page_count = {pages}")
        write = asyncio.ensure_future(store.execute("INSERT INTO blobs VALUES (?)", (b"x" * 200_000,)))
        await asyncio.sleep(0.5)
        waiting = not write.done()
        await store.db.execute("PRAGMA max_page_count = 1000000")
        await asyncio.wait_for(write, 10)
        stored = (await store.fetchone("SELECT COUNT(*) FROM blobs"))[0]
        assert (waiting, stored) == (True, 1)
    finally:
        await store.close()


async def test_a_disk_that_stays_full_fails_the_write_in_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(store_db, "DISK_FULL_WAIT_S", 0.5)
    store = await Store.open(tmp_path / "svc.db")
    try:
        await store.execute("CREATE TABLE blobs (data BLOB)")
        pages = (await store.fetchone("PRAGMA page_count"))[0]
        await store.db.execute(f"PRAGMA max_page_count = {pages}")
        try:
            await store.execute("INSERT INTO blobs VALUES (?)", (b"x" * 200_000,))
            failed = ""
        except Exception as exc:  # noqa: BLE001
            failed = str(exc)
        assert "full" in failed
    finally:
        await store.close()
