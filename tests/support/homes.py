"""Short homes: Unix socket paths are limited to ~107 bytes (AF_UNIX), so a daemon home with its
socket inside must not live under pytest's long tmp_path."""
from __future__ import annotations

import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def short_home(prefix: str = "svc-t-") -> Path:
    """A fresh directory under /tmp; the caller removes it (or use `short_dir`)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@contextmanager
def short_dir(prefix: str = "svc-t-") -> Iterator[Path]:
    path = short_home(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
