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
    """Every complete JSON line of one of the daemon's own files that may still be being appended
    to (a line being written right now does not parse and is left out); [] when the file cannot be
    read. Never for a file a sandbox writes: read those with workspace.read_file and parse_jsonl."""
    try:
        data = path.read_bytes()
    except OSError:
        return []
    return parse_jsonl(data)


def parse_jsonl(data: bytes) -> list:
    """Every line of `data` that parses as JSON."""
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
