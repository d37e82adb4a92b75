"""Shared test support: the one place test modules import helpers from.

Test modules import from ``tests.support`` only, never from another test module or a conftest
(tests/unit/test_test_layout.py enforces it). Loaded as a pytest plugin (``tests.support.plugin``)
from tests/conftest.py for the few fixtures several directories share.

- ``images``: the stock image names, from the product's own constants.
- ``homes``: short daemon homes (AF_UNIX socket paths are limited to ~107 bytes).
- ``api``: ONE HTTP client class for the daemon (``Api``) and ways to start an in-process daemon.
- ``waiting``: polling (``wait_for``, ``eventually``, ``wait_state``).
- ``sse``: reading a Server-Sent Events stream.
- ``specs``: spec builders and spec upload.
- ``runs``: run helpers against the real engine (start, wait, replay, judge, webhook receiver).
- ``fakes``: fake scenario runner (experiments), fake tracing collectors and LLM providers.
- ``tui``: the daemon on a Unix socket for TUI tests, app factory, screen text, goldens.
- ``procs``: a real svcd subprocess and the CLI as a subprocess.
- ``proxyenv``, ``pgwire``: container plumbing for the proxy tests.
"""
