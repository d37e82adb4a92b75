"""Shared test support: the one place test modules import helpers from.

Test modules import from ``tests.support`` only, never from another test module or a conftest
(tests/unit/test_test_layout.py enforces it). ``tests.support.plugin`` is loaded as a pytest plugin
from tests/conftest.py for the fixtures several directories share; directory conftest.py files
hold only their own fixtures.

- ``images``: the stock image names, from the product's own constants (daemon.sandbox.services).
- ``homes``: short daemon homes (AF_UNIX socket paths are limited to ~107 bytes).
- ``api``: ONE HTTP client class for the daemon (``Api``: sends a key, returns (response, body);
  spec upload, sandbox helpers, SSE) and ways to start an in-process daemon.
- ``waiting``: polling (``wait_for``, ``eventually``, their blocking twins).
- ``sse``: reading Server-Sent Events (complete bodies or live streams).
- ``specs``: spec builders (YAML and documents) shared by several modules.
- ``experiments``: a deterministic fake scenario runner and the experiment API helpers.
- ``runs``: runs against the real engine (start, wait, replay with the CLI, fake judge, webhook receiver).
- ``engine``: what a sandbox left behind on the Docker engine.
- ``audit``: a sandbox's audit log.
- ``store``: direct store rows for API tests.
- ``tracing``: a fake trace collector and a fake OpenAI/Anthropic provider.
- ``tui``: the daemon on a Unix socket for TUI tests, app factory, screen text.
- ``goldens``: golden files; a missing golden fails (write on purpose with SVC_UPDATE_GOLDENS=1).
- ``procs``: a real svcd subprocess and the svc CLI as a subprocess.
- ``proxyenv``, ``pgwire``: container plumbing for the proxy tests.
"""
