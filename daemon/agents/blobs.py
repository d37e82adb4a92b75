"""The content-addressed blob store under ``$SERVICE_HOME/blobs/sha256/<hex digest>``.

Snapshots, trajectories and exports are written here once per distinct content. Writes go to a
temporary file in the same directory and are renamed into place, so a reader never sees half a blob.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class Blobs:
    def __init__(self, root: Path):
        self.root = root

    def path(self, digest: str) -> Path:
        hexdigest = digest.split(":", 1)[-1]
        if len(hexdigest) != 64 or any(c not in "0123456789abcdef" for c in hexdigest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return self.root / hexdigest

    def exists(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def put_bytes(self, data: bytes) -> str:
        """Store ``data``; returns its hex sha256 (blocking: call through ``asyncio.to_thread``)."""
        hexdigest = hashlib.sha256(data).hexdigest()
        target = self.root / hexdigest
        if not target.is_file():
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return hexdigest

    def adopt(self, tmp: Path, hexdigest: str) -> Path:
        """Move an already-hashed temporary file (in ``self.root``) into place."""
        target = self.root / hexdigest
        if target.is_file():
            tmp.unlink(missing_ok=True)
        else:
            os.replace(tmp, target)
        return target

    def temp_file(self) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".upload-")
        os.close(fd)
        return Path(tmp)

    def delete(self, digest: str) -> bool:
        try:
            self.path(digest).unlink()
            return True
        except FileNotFoundError:
            return False
