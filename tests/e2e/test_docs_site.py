"""The documentation site opens in headless Chromium with no console error: the home page and the
heaviest one, served over HTTP from 127.0.0.1 as `mkdocs serve` would. The site
is the one `make docs` built (build/site, before pytest in `make test`) when it is newer than every
source; otherwise it is built here, with --strict."""
from __future__ import annotations

import functools
import os
import http.server
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "build" / "site"
PAGES = ("", "reference/api/")  # the home page (the theme's scripts, the search) and the largest page
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


def _site(tmp_path: Path) -> Path:
    sources = [ROOT / "mkdocs.yml", *(p for p in (ROOT / "docs").rglob("*") if p.is_file() and "__pycache__" not in p.parts)]
    index = BUILT / "index.html"
    if index.exists() and index.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return BUILT
    site = tmp_path / "site"
    mkdocs = Path(sys.executable).parent / "mkdocs"
    subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(site)], cwd=ROOT, check=True,
                   capture_output=True, timeout=600, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    return site


@pytest.mark.skipif(BROWSER is None and not os.environ.get("CI"),
                    reason="needs Debian's chromium package (.ci/run installs it; in CI its absence fails)")
def test_the_site_opens_in_headless_chromium_without_console_errors(tmp_path):
    assert BROWSER is not None, "chromium is not installed: .ci/run installs Debian's chromium package"
    site = _site(tmp_path)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    problems = []
    try:
        for page in PAGES:
            url = f"http://127.0.0.1:{server.server_address[1]}/{page}"
            done = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                   f"--user-data-dir={tmp_path / 'chrome'}", "--enable-logging=stderr", "--v=0",
                                   "--virtual-time-budget=3000", "--dump-dom", url], capture_output=True, text=True, timeout=120)
            console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
            if console or "</html>" not in done.stdout:
                problems.append(f"{url}: {console or 'no page rendered'}")
    finally:
        server.shutdown()
        server.server_close()
    assert not problems, "\n".join(problems)
