"""The SQLite store: one aiosqlite connection in WAL mode, numbered migrations applied at start.

Every write commits before the API answers, so a daemon killed with SIGKILL loses nothing it
acknowledged (WAL + synchronous=NORMAL survives process death; only power loss can drop the tail).
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

import aiosqlite

MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")
DISK_FULL_WAIT_S = 120.0  # how long a single write waits for room when the disk is full
log = logging.getLogger("svcd.store")


def migration_files() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every migration shipped in daemon/store/migrations, in order."""
    found = []
    folder = resources.files("daemon.store") / "migrations"
    for entry in folder.iterdir():
        match = MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text()))
    found.sort()
    numbers = [n for n, _, _ in found]
    if len(numbers) != len(set(numbers)):
        raise RuntimeError(f"duplicate migration numbers in {folder}: {numbers}")
    return found


def private_file(path: Path | str, create: bool = True) -> None:
    """`path` exists (when `create`) with mode 0600, however the umask is set."""
    import os

    if create:
        os.close(os.open(str(path), os.O_RDWR | os.O_CREAT, 0o600))
    try:
        if os.stat(str(path)).st_mode & 0o777 != 0o600:
            os.chmod(str(path), 0o600)
    except FileNotFoundError:
        pass


class Transaction:
    """Statements inside `Store.transaction()`; they run on the connection without taking the lock."""

    def __init__(self, db: aiosqlite.Connection):
        self.db = db

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        cursor = await self.db.execute(sql, tuple(params))
        count = cursor.rowcount
        await cursor.close()
        return count

    async def insert(self, sql: str, params: Iterable[Any] = ()) -> int:
        cursor = await self.db.execute(sql, tuple(params))
        rowid = cursor.lastrowid
        await cursor.close()
        return rowid

    async def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        await self.db.executemany(sql, [tuple(r) for r in rows])

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        async with self.db.execute(sql, tuple(params)) as cursor:
            return await cursor.fetchone()

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        async with self.db.execute(sql, tuple(params)) as cursor:
            return list(await cursor.fetchall())


class Store:
    """One shared connection. Every write takes `write_lock`, so a coroutine's multi-statement
    transaction never swallows (or rolls back) another coroutine's write on the same connection."""

    def __init__(self, db: aiosqlite.Connection):
        self.db = db
        self.write_lock = asyncio.Lock()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Transaction]:
        async with self.write_lock:
            try:
                await self._to_completion("BEGIN IMMEDIATE")
            except asyncio.CancelledError:
                if self.db.in_transaction:
                    await self._to_completion("ROLLBACK")
                raise
            try:
                yield Transaction(self.db)
            except BaseException:
                await self._to_completion("ROLLBACK")
                raise
            await self._to_completion("COMMIT")

    async def _to_completion(self, sql: str) -> None:
        """Runs sql and waits for it even if the caller is cancelled meanwhile.

        aiosqlite finishes a statement in its thread whatever happens to the awaiting task, so giving
        up the write lock before BEGIN, COMMIT or ROLLBACK has really run would leave the next
        transaction inside this one ("cannot start a transaction within a transaction").
        """
        statement = asyncio.ensure_future(self.db.execute(sql))
        try:
            await asyncio.shield(statement)
        except asyncio.CancelledError:
            await statement
            raise

    @classmethod
    async def open(cls, path: Path | str) -> "Store":
        private_file(path)  # SQLite gives -wal and -shm the database file's mode
        db = await aiosqlite.connect(str(path), isolation_level=None)
        db.row_factory = aiosqlite.Row
        await db.execute("PRAGMA journal_mode=WAL")
        for suffix in ("-wal", "-shm"):
            private_file(f"{path}{suffix}", create=False)
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.execute("PRAGMA foreign_keys=ON")
        await db.execute("PRAGMA busy_timeout=5000")
        store = cls(db)
        await store.migrate()
        return store

    async def close(self) -> None:
        await self.db.close()

    async def migrate(self) -> list[str]:
        await self.db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))"
        )
        done = {row[0] for row in await self.fetchall("SELECT number FROM schema_migrations")}
        applied = []
        for number, name, sql in migration_files():
            if number in done:
                continue
            await self.db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _split_sql(sql):
                    await self.db.execute(statement)
                await self.db.execute("INSERT INTO schema_migrations (number, name) VALUES (?, ?)", (number, name))
                await self.db.execute("COMMIT")
            except Exception:
                await self.db.execute("ROLLBACK")
                raise
            applied.append(name)
        return applied

    async def execute(self, sql: str, params: Iterable[Any] = ()) -> int:
        """Run one write statement and commit; returns the rowcount. A full disk is waited out (at
        most DISK_FULL_WAIT_S): a verdict or a job's end written a little late is not lost."""
        return await self._while_full(lambda: Transaction(self.db).execute(sql, params), sql)

    async def insert(self, sql: str, params: Iterable[Any] = ()) -> int:
        return await self._while_full(lambda: Transaction(self.db).insert(sql, params), sql)

    async def _while_full(self, write: Callable[[], Awaitable[int]], sql: str) -> int:
        waited = 0.0
        delay = 0.2
        while True:
            async with self.write_lock:
                try:
                    return await write()
                except sqlite3.OperationalError as exc:
                    if "full" not in str(exc) or waited >= DISK_FULL_WAIT_S:
                        raise
            if waited == 0.0:
                log.warning("the store's disk is full; waiting up to %ss to write (%s)", DISK_FULL_WAIT_S, sql.split(" ", 3)[:3])
            await asyncio.sleep(delay)
            waited += delay
            delay = min(2.0, delay * 2)

    async def executemany(self, sql: str, rows: Iterable[Iterable[Any]]) -> None:
        async with self.transaction() as tx:
            await tx.executemany(sql, rows)

    async def fetchone(self, sql: str, params: Iterable[Any] = ()) -> aiosqlite.Row | None:
        async with self.db.execute(sql, tuple(params)) as cursor:
            return await cursor.fetchone()

    async def fetchall(self, sql: str, params: Iterable[Any] = ()) -> list[aiosqlite.Row]:
        async with self.db.execute(sql, tuple(params)) as cursor:
            return list(await cursor.fetchall())


def _split_sql(sql: str) -> list[str]:
    # Migrations are plain DDL; statements end with ';' at the end of a line.
    statements, current = [], []
    for line in sql.splitlines():
        if line.strip().startswith("--"):
            continue
        current.append(line)
        if line.rstrip().endswith(";"):
            statements.append("\n".join(current).strip())
            current = []
    tail = "\n".join(current).strip()
    if tail:
        statements.append(tail)
    return [s for s in statements if s]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def loads(text: str | None, default: Any = None) -> Any:
    return default if text is None else json.loads(text)
