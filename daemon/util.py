"""Small shared helpers: ids, timestamps, hashing, JSON-lines files."""
from __future__ import annotations

import hashlib
import json
import secrets
from datetime import datetime, timezone
from pathlib import Path


def new_id(prefix: str, nbytes: int = 9) -> str:
    return prefix + secrets.token_hex(nbytes)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()


def read_jsonl(path: Path) -> list:
    """Every complete JSON line of a file that may still be being appended to (a line being written
    right now does not parse and is left out); [] when the file cannot be read."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
