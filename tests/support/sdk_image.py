"""A test image with the official `openai` and `anthropic` Python SDKs: the stock python image plus
the two packages (and their dependencies) installed from PyPI (pip's cache after the first time)
into its site directory. Tagged by the content digest of its inputs, so it is built once per
machine and rebuilt only when the stock image or a pinned version changes."""
from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.images import PYTHON

REPO = "localhost/svc-test/model-sdks"


def _pins() -> list[str]:
    return [f"{name}=={importlib.metadata.version(name)}" for name in ("openai", "anthropic")]


def sdk_image(docker_client) -> str:
    stock = docker_client.images.get(PYTHON).id
    digest = hashlib.sha256("\n".join([stock, *_pins()]).encode()).hexdigest()[:16]
    tag = f"{REPO}:{digest}"
    try:
        docker_client.images.get(tag)
        return tag
    except Exception:  # noqa: BLE001 - not built yet
        pass
    context = Path(tempfile.mkdtemp(prefix="svc-sdk-image-"))
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target",
                        str(context / "site"), "--python-version", "3.11", "--only-binary=:all:",
                        "--platform", "manylinux2014_x86_64", *_pins()], check=True)
        (context / "Dockerfile").write_text(
            f"FROM {PYTHON}\nCOPY site /usr/local/lib/python3.11/dist-packages\n")
        docker_client.images.build(path=str(context), tag=tag, rm=True, labels={"svc.test": "1"})
    finally:
        shutil.rmtree(context, ignore_errors=True)
    return tag
