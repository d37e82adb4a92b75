"""Docker sandboxes, in layers (each imports only those below it; pyproject.toml's import-linter
contract checks it):

- `engine`: the container engine. `engine.SandboxDriver` (the protocol), `ContainerSpec`,
  `ContainerInfo`, `RawExec` and the errors; `engine.docker.DockerDriver` (the local engine),
  `engine.swarm` (a Docker Swarm), `engine.select.make_driver` (the app picks one and injects it).
- `workspace` (safe paths: nothing opened through a link; manifest, diff, fixtures),
  `host_workspace.HostWorkspace` (every touch of a /workspace by the daemon), `diskquota` (the
  workspace disk limit), `redact`, `db_audit` (the db audit inside PostgreSQL).
- `services` (postgres, redis, http_mock, generic; readiness), `audit.AuditLog` (the authoritative
  audit log), `fswatch`, `secrets`, `images` (the stock images), `determinism`, `firewall`,
  `leftovers` (stopping what an agent left running).
- `runtime`: `SandboxRuntime` (a live sandbox's in-memory record) and what the manager's parts
  share: `LiveSandboxes` (the one registry of live sandboxes), `SandboxEvents` (the lifecycle
  stream), `BackgroundTasks`.
- `fixtures`: the fixtures step; `boot`: the boot pipeline as named steps over a `BootContext`
  (`STEPS`; the context carries the engine, store, settings, firewall, disks and the rest
  explicitly and is what extensions' hooks get, typed as `BootHost`), `BootExtension` (the
  extensions' no-op hooks).
- `network.SandboxPolicyExtension` (egress proxy, audit capture, determinism), and the parts of the
  manager, each a class given its collaborators: `commands.SandboxCommands`, `files.WorkspaceFiles`,
  `lifecycle.SandboxLifecycle`, `pool.SandboxPool`. `model_gateway`: the model gateway extension.
- `handle.Sandbox`: a handle on one live sandbox (`manager.open(id)`), all a run, its checks, its
  exports and an image agent use; `handle.Booting` / `BootResult`: a boot under way and how it ended.
- `manager.SandboxManager` (at `app[SANDBOXES]`): boot / open / exec / files / state / diff /
  destroy, capacity. Its docstring is the interface. `prewarm`: filling the warm pool for queued runs.
- `programs/`: what runs inside containers (the http_mock server, the egress proxy).
"""
