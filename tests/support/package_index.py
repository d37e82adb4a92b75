"""A PEP 503 package index served over HTTP from a directory, on its own thread, and a trivial
wheel builder (the standard wheel layout written with zipfile) for the versions it holds."""
from __future__ import annotations

import base64
import hashlib
import html
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def build_trivial_wheel(dest: Path, name: str, version: str, module_text: str = "") -> Path:
    """A pure-Python wheel holding one module `<name>_release.py` (RECORD hashes included)."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        f"{name}_release.py": module_text or f"VERSION = {version!r}\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: svc-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = "\n".join(record) + "\n"
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


class PackageIndex:
    """`root/simple/<project>/index.html` linking to `root/files/<wheel>#sha256=...`."""

    def __init__(self, root: Path):
        self.root = root
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def add(self, project: str, wheel: Path) -> None:
        files = self.root / "files"
        files.mkdir(parents=True, exist_ok=True)
        (files / wheel.name).write_bytes(wheel.read_bytes())
        page = self.root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        links = []
        for path in sorted(files.glob(f"{project}-*")):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            links.append(f'<a href="../../files/{html.escape(path.name)}#sha256={digest}">{html.escape(path.name)}</a><br>')
        (page / "index.html").write_text("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n")

    def __enter__(self) -> "PackageIndex":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
