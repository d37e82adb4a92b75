"""Keyset pagination over a table's `seq`: newest first, the cursor is the last row's `seq`.

The store side of paging (no request, no answer body): the cursor codec, and the query that reads
one page of rows. daemon/http.py reads `limit`/`cursor` from a request and wraps the rows in the
page body the API answers with.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from daemon.errors import InvalidRequest

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def decode_cursor(cursor: str) -> int:
    """The `seq` a cursor stands for. A cursor is the decimal `seq` of the last item served
    (contract.common.CURSOR_PATTERN); the same number base64-encoded is read too.
    400 invalid_request for anything else."""
    if cursor.isascii() and cursor.isdigit() and len(cursor) <= 18:
        return int(cursor)
    try:
        text = base64.urlsafe_b64decode(cursor.encode() + b"==").decode()
        if text.isascii() and text.isdigit() and len(text) <= 18:
            return int(text)
    except Exception:
        pass
    raise InvalidRequest("query.cursor: not a cursor this server issued", [{"loc": "query.cursor", "msg": "invalid cursor"}])


def encode_cursor(seq: int) -> str:
    """The cursor of the item with `seq`."""
    return str(seq)


@dataclass
class RowPage:
    """One page of rows: `rows` (at most `limit`), and `fetched`, how many rows the query returned
    when asked for limit + 1 (more than `limit` means there is a next page)."""
    rows: list[Any]
    limit: int
    fetched: int

    @property
    def last_seq(self) -> int | None:
        return self.rows[-1]["seq"] if self.rows else None

    @property
    def more(self) -> bool:
        return self.fetched > self.limit


async def newest_first(store: Any, sql: str, params: list[Any], limit: int, after: int | None) -> RowPage:
    """A RowPage of `sql` (which must select `seq` and end with a WHERE clause ready for AND),
    newest first, starting after the row `after` (a decoded cursor) when given."""
    if after is not None:
        sql += " AND seq < ?"
        params = [*params, after]
    rows = await store.fetchall(sql + " ORDER BY seq DESC LIMIT ?", [*params, limit + 1])
    return RowPage(rows[:limit], limit, len(rows))
