"""Docker sandboxes.

- `manager.SandboxManager` (at `app["sandboxes"]`): create / exec / files / state / diff / destroy,
  the boot pipeline, capacity, expiry, orphan reaping. Its docstring is the interface.
- `driver.SandboxDriver` / `driver.DockerDriver`: the container runtime (docker SDK off the loop).
- `services`: backing services (postgres, redis, http_mock, generic) and readiness waits.
- `workspace`: the host-side workspace (safe paths: nothing opened through a link; manifest, diff).
- `diskquota`: the workspace disk limit (a loop-mounted ext4 per sandbox).
- `audit.AuditLog`: the authoritative audit log (daemon-only evidence directory), the convenience
  copy `<workspace>/.svc/audit.jsonl` + the lifecycle stream.
- `secrets`: the five secret sources.
- `images`: the stock images (`svc images build`).
- `programs/http_mock.py`: the mock HTTP server run inside `http_mock` services.
"""
