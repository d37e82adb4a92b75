"""Small shared helpers: ids, timestamps, hashing."""
from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone


def new_id(prefix: str, nbytes: int = 9) -> str:
    return prefix + secrets.token_hex(nbytes)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()
