"""Docker sandboxes.

- `manager.SandboxManager` (at `app[SANDBOXES]`): create / exec / files / state / diff / destroy,
  capacity. Its docstring is the interface. The class is split by job: `lifecycle` (expiry, destroy,
  teardown, orphan reaping), `commands` (exec, service_exec, mock requests), `files` (workspace
  files, manifest/diff, disk limit); `runtime.SandboxRuntime` is a live sandbox's in-memory record.
- `boot`: the boot pipeline as named steps over a `BootContext` (`STEPS`), and `BootExtension`, the
  base class of boot extensions (no-op hooks); `fixtures`: the fixtures step.
- `network.SandboxPolicyExtension`: the egress proxy, audit capture (the db audit: `db_audit`), determinism, snapshot egress.
- `driver.SandboxDriver` / `driver.DockerDriver`: the container runtime (docker SDK off the loop).
- `services`: backing services (postgres, redis, http_mock, generic) and readiness waits.
- `workspace`: the host-side workspace (safe paths: nothing opened through a link; manifest, diff).
- `diskquota`: the workspace disk limit (a loop-mounted ext4 per sandbox).
- `audit.AuditLog`: the authoritative audit log (daemon-only evidence directory), the convenience
  copy `<workspace>/.svc/audit.jsonl` + the lifecycle stream.
- `secrets`: resolving a sandbox's secrets (sent values, `dashboard` ones from daemon/store/secrets.py).
- `images`: the stock images (`svc images build`).
- `programs/http_mock.py`: the mock HTTP server run inside `http_mock` services.
"""
