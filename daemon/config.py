"""Daemon settings, read once from the environment (prefix SERVICE_)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

# The client finds the daemon with the same rules, so they are defined once, in client.config.
from client.config import default_home, default_socket


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}")


def _env_size(name: str, default: int) -> int:
    """Bytes, as an integer or a size like '16g' (binary units, as in a spec)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    from daemon.spec.durations import parse_size

    try:
        return parse_size(int(raw) if raw.isdigit() else raw)
    except ValueError:
        raise SystemExit(f"{name} must be a size like 16g, got {raw!r}")


def _env_duration(name: str, default: float) -> float:
    """Seconds, as a number or a duration like '24h' (as in a spec)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    from daemon.spec.durations import parse_duration

    try:
        return parse_duration(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a duration like 24h, got {raw!r}")


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise SystemExit(f"{name} must be a number, got {raw!r}")


def _env_bool(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _env_switch(name: str, default: bool) -> bool:
    """An on/off setting where a typo must not silently pick a side."""
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise SystemExit(f"{name} must be on or off, got {raw!r}")


@dataclass
class Settings:
    home: Path = field(default_factory=default_home)
    socket_path: Path | None = None
    port: int = 7878
    auth_disabled: bool = False
    rate_limit_per_s: float = 30.0
    rate_limit_burst: int = 60
    max_body_bytes: int = 32 * 1024 * 1024
    max_upload_bytes: int = 100 * 1024 * 1024
    max_sandboxes: int = 16
    idempotency_ttl_s: int = 24 * 3600  # SERVICE_IDEMPOTENCY_TTL: seconds an Idempotency-Key's answer is replayed
    # SERVICE_STREAM_TIMEOUT: seconds after which GET /v1/runs/{id}/stream closes even if the run goes on
    stream_timeout_s: float = 1800.0
    daemon_id: str = ""
    # host firewall of sandbox networks (daemon/sandbox/firewall.py); off: sandboxes can reach the host
    sandbox_firewall: bool = True
    iptables: str = "iptables"  # SERVICE_IPTABLES: the iptables binary (path or name on PATH)
    ip6tables: str | None = None  # SERVICE_IP6TABLES; None: the one next to `iptables`
    # workspace disk limit enforced by a loop-mounted ext4 per sandbox (daemon/sandbox/diskquota.py);
    # SERVICE_WORKSPACE_QUOTA=off: the workspace size is only checked after commands (a warning)
    workspace_quota: bool = True
    # SERVICE_ENGINE: where sandboxes run, the local Docker engine or a swarm (daemon/sandbox/engine/swarm/);
    # SERVICE_SWARM_MANAGER / _NODES / _IMAGES say where the swarm is (daemon/sandbox/engine/swarm/settings.py)
    engine: str = "docker"
    swarm_manager: str = ""
    swarm_nodes: str = ""
    swarm_images: str = ""
    swarm_cert_path: str = ""  # SERVICE_SWARM_CERT_PATH: ca.pem, cert.pem, key.pem for TLS to the engines
    swarm_ssh_config: str = ""  # SERVICE_SWARM_SSH_CONFIG: the ssh_config for ssh:// engines
    # Team chat (Slack): OAuth app credentials, request signing secret, an optional server-wide bot
    # token, the Web API base (tests and proxies) and the OAuth authorize page. Secrets stay out of repr.
    chat_client_id: str = ""
    chat_client_secret: str = field(default="", repr=False)
    chat_signing_secret: str = field(default="", repr=False)
    chat_bot_token: str = field(default="", repr=False)
    # The one tenant (name or id; empty: the admin tenant `default`) SERVICE_CHAT_BOT_TOKEN posts for:
    # any other tenant needs its own install, so no tenant reaches a workspace it did not install.
    chat_bot_tenant: str = ""
    chat_api_base: str = "https://slack.com/api"
    chat_authorize_url: str = "https://slack.com/oauth/v2/authorize"
    # The address deep links in chat messages open (the proxy in front of svcd); empty: http://127.0.0.1:<port>.
    chat_link_base: str = ""
    # The investigation agent's model (OpenAI-compatible); unset parts fall back to SERVICE_JUDGE_*.
    llm_base_url: str = ""
    llm_api_key: str = field(default="", repr=False)
    llm_model: str = ""
    # Warm sandbox pool (daemon/sandbox/pool.py): sandboxes kept booted per shape (0: no pool), the
    # bound on all of them, seconds a shape may go unused before its pool is drained, and the free
    # memory (MiB) below which nothing is refilled.
    pool_size: int = 2
    pool_max_total: int = 8
    pool_idle_s: float = 300.0
    pool_min_free_mb: int = 512
    # Idle sandbox networks kept for the next sandbox instead of removed (daemon/sandbox/network_pool.py;
    # 0: every sandbox creates and removes its own).
    network_pool_size: int = 4
    # The periodic sweep (daemon/sandbox/lifecycle.py `sweep`): every SERVICE_REAP_INTERVAL seconds
    # (0: never) the engine objects and host directories of this daemon that no live, booting or
    # pooled sandbox owns and that are older than SERVICE_REAP_GRACE seconds are removed.
    reap_interval_s: float = 60.0
    reap_grace_s: float = 120.0
    # Dockerfile bases (daemon/sandbox/build.py): the CA bundle every RUN sees as a build secret (the
    # host's trust store by default; never in the image; "off": none) and the docker CLI that builds
    # with BuildKit (empty: the first found).
    build_ca_bundle: str = "/etc/ssl/certs/ca-certificates.crt"
    docker_cli: str = ""
    # SERVICE_BUILD_REGISTRIES: registries (comma-separated hosts, e.g. docker.io,ghcr.io) a build's FROM,
    # a COPY --from or a spec's base may be pulled from; empty (the default): local images only. Loopback,
    # link-local and private address literals are refused even when listed.
    build_registries: str = ""
    # SERVICE_BUILD_NETWORK: the network of a build's RUN steps: "none" (the default: no network at all) or
    # "bridge" (the engine's default bridge, which reaches this host's docker0 address and whatever the host
    # routes: an operator choice for tenants they trust, never a spec's).
    build_network: str = "none"
    # SERVICE_BUILD_TIMEOUT: the longest a build may run (like 30m); SERVICE_BUILD_MEMORY / _PIDS / _CPUS:
    # caps on the engine's BuildKit cgroup (docker/buildkit, shared by the builds of this engine) when this
    # daemon can write it (a local cgroupfs engine); the engine's BuildKit ignores per-build limits.
    build_timeout_s: float = 1800.0
    build_memory: int = 4 * 1024**3
    build_pids: int = 2048
    build_cpus: float = field(default_factory=lambda: float(os.cpu_count() or 1))
    # SERVICE_OUTBOUND_ALLOW_PRIVATE: tenant-supplied URLs (webhooks, alert channels) may name loopback,
    # private and this host's own addresses (daemon/netguard.py); off: refused (400 at registration,
    # re-checked at connect time). Link-local and cloud metadata addresses are refused either way.
    outbound_allow_private: bool = False
    # The model gateway (models:): SERVICE_GATEWAY_MAX_BODY (a size, default 4m), the largest request body
    # an agent may send a provider (larger: a 413 in the provider's error shape, never recorded whole);
    # SERVICE_GATEWAY_MAX_RECORDING (default 64m), the size of a run's model recording past which each
    # further call is recorded as metadata only (`truncated`). Prices: SERVICE_PRICING_FILE
    # (daemon/traces/pricing.py); a model in no table is counted at the highest known price.
    gateway_max_body: int = 4 * 1024**2
    gateway_max_recording: int = 64 * 1024**2
    # Operator caps on what a spec may ask for (checked when a spec is uploaded and whenever one is
    # used: runs, replicas, experiments, sandboxes): SERVICE_MAX_MEMORY / _DISK (sizes like 16g),
    # SERVICE_MAX_PIDS, SERVICE_MAX_CPUS, SERVICE_MAX_TIMEOUT (every timeout of a spec; like 24h).
    max_memory: int = 16 * 1024**3
    max_disk: int = 50 * 1024**3
    max_pids: int = 4096
    max_cpus: float = field(default_factory=lambda: float(os.cpu_count() or 1))
    max_timeout_s: float = 24 * 3600.0
    # SERVICE_MAX_RUNNING_PER_TENANT: jobs (runs, experiment runs, scoring) one tenant may have
    # running at once; more wait in the queue. 0: half the engine's global limit, at least 1.
    max_running_per_tenant: int = 0
    # SERVICE_MAX_SPEC_BYTES: the largest spec YAML accepted (413 above it)
    max_spec_bytes: int = 1024 * 1024
    # SERVICE_MAX_SPECS_PER_TENANT (spec ids) and SERVICE_MAX_SPEC_VERSIONS (versions of one id)
    max_specs_per_tenant: int = 1000
    max_spec_versions: int = 1000
    # SERVICE_MAX_STREAMS_PER_TENANT: open SSE streams per tenant (429 above it)
    max_streams_per_tenant: int = 32
    # SERVICE_MAX_KEYS_PER_TENANT: API keys per tenant (409 above it)
    max_keys_per_tenant: int = 20

    def __post_init__(self) -> None:
        if self.socket_path is None:
            self.socket_path = default_socket(self.home)

    @classmethod
    def from_env(cls) -> "Settings":
        home = default_home()
        rate = os.environ.get("SERVICE_RATE_LIMIT", "30")
        return cls(
            home=home,
            socket_path=default_socket(home),
            port=_env_int("SERVICE_PORT", 7878),
            auth_disabled=_env_bool("SERVICE_AUTH_DISABLED"),
            rate_limit_per_s=float(rate),
            rate_limit_burst=max(1, int(float(rate) * 2)),
            max_body_bytes=_env_int("SERVICE_MAX_BODY_BYTES", 32 * 1024 * 1024),
            max_upload_bytes=_env_int("SERVICE_MAX_UPLOAD_BYTES", 100 * 1024 * 1024),
            max_sandboxes=_env_int("SERVICE_MAX_SANDBOXES", 16),
            idempotency_ttl_s=_env_int("SERVICE_IDEMPOTENCY_TTL", 24 * 3600),
            stream_timeout_s=float(_env_int("SERVICE_STREAM_TIMEOUT", 1800)),
            sandbox_firewall=_env_switch("SERVICE_SANDBOX_FIREWALL", True),
            iptables=os.environ.get("SERVICE_IPTABLES") or "iptables",
            ip6tables=os.environ.get("SERVICE_IP6TABLES") or None,
            workspace_quota=_env_switch("SERVICE_WORKSPACE_QUOTA", True),
            engine=os.environ.get("SERVICE_ENGINE", "docker"),
            swarm_manager=os.environ.get("SERVICE_SWARM_MANAGER", ""),
            swarm_nodes=os.environ.get("SERVICE_SWARM_NODES", ""),
            swarm_images=os.environ.get("SERVICE_SWARM_IMAGES", ""),
            swarm_cert_path=os.environ.get("SERVICE_SWARM_CERT_PATH", ""),
            swarm_ssh_config=os.environ.get("SERVICE_SWARM_SSH_CONFIG", ""),
            chat_client_id=os.environ.get("SERVICE_CHAT_CLIENT_ID", ""),
            chat_client_secret=os.environ.get("SERVICE_CHAT_CLIENT_SECRET", ""),
            chat_signing_secret=os.environ.get("SERVICE_CHAT_SIGNING_SECRET", ""),
            chat_bot_token=os.environ.get("SERVICE_CHAT_BOT_TOKEN", ""),
            chat_bot_tenant=os.environ.get("SERVICE_CHAT_BOT_TENANT", ""),
            chat_api_base=os.environ.get("SERVICE_CHAT_API_BASE") or "https://slack.com/api",
            chat_authorize_url=os.environ.get("SERVICE_CHAT_AUTHORIZE_URL") or "https://slack.com/oauth/v2/authorize",
            chat_link_base=os.environ.get("SERVICE_CHAT_LINK_BASE", ""),
            llm_base_url=os.environ.get("SERVICE_LLM_BASE_URL") or os.environ.get("SERVICE_JUDGE_BASE_URL", ""),
            llm_api_key=os.environ.get("SERVICE_LLM_API_KEY") or os.environ.get("SERVICE_JUDGE_API_KEY", ""),
            llm_model=os.environ.get("SERVICE_LLM_MODEL") or os.environ.get("SERVICE_JUDGE_MODEL", ""),
            pool_size=_env_int("SERVICE_POOL_SIZE", 2),
            pool_max_total=_env_int("SERVICE_POOL_MAX_TOTAL", 8),
            pool_idle_s=float(_env_int("SERVICE_POOL_IDLE_S", 300)),
            pool_min_free_mb=_env_int("SERVICE_POOL_MIN_FREE_MB", 512),
            network_pool_size=_env_int("SERVICE_NETWORK_POOL", 4),
            reap_interval_s=_env_float("SERVICE_REAP_INTERVAL", 60.0),
            reap_grace_s=_env_float("SERVICE_REAP_GRACE", 120.0),
            build_ca_bundle=os.environ.get("SERVICE_BUILD_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"),
            docker_cli=os.environ.get("SERVICE_DOCKER_CLI", ""),
            build_registries=os.environ.get("SERVICE_BUILD_REGISTRIES", ""),
            build_network=os.environ.get("SERVICE_BUILD_NETWORK", "none"),
            build_timeout_s=_env_duration("SERVICE_BUILD_TIMEOUT", 1800.0),
            build_memory=_env_size("SERVICE_BUILD_MEMORY", 4 * 1024**3),
            build_pids=_env_int("SERVICE_BUILD_PIDS", 2048),
            build_cpus=_env_float("SERVICE_BUILD_CPUS", float(os.cpu_count() or 1)),
            outbound_allow_private=_env_switch("SERVICE_OUTBOUND_ALLOW_PRIVATE", False),
            gateway_max_body=_env_size("SERVICE_GATEWAY_MAX_BODY", 4 * 1024**2),
            gateway_max_recording=_env_size("SERVICE_GATEWAY_MAX_RECORDING", 64 * 1024**2),
            max_memory=_env_size("SERVICE_MAX_MEMORY", 16 * 1024**3),
            max_disk=_env_size("SERVICE_MAX_DISK", 50 * 1024**3),
            max_pids=_env_int("SERVICE_MAX_PIDS", 4096),
            max_cpus=_env_float("SERVICE_MAX_CPUS", float(os.cpu_count() or 1)),
            max_timeout_s=_env_duration("SERVICE_MAX_TIMEOUT", 24 * 3600.0),
            max_running_per_tenant=_env_int("SERVICE_MAX_RUNNING_PER_TENANT", 0),
            max_spec_bytes=_env_size("SERVICE_MAX_SPEC_BYTES", 1024 * 1024),
            max_specs_per_tenant=_env_int("SERVICE_MAX_SPECS_PER_TENANT", 1000),
            max_spec_versions=_env_int("SERVICE_MAX_SPEC_VERSIONS", 1000),
            max_streams_per_tenant=_env_int("SERVICE_MAX_STREAMS_PER_TENANT", 32),
            max_keys_per_tenant=_env_int("SERVICE_MAX_KEYS_PER_TENANT", 20),
        )

    @property
    def db_path(self) -> Path:
        return self.home / "svc.db"

    @property
    def blobs_dir(self) -> Path:
        return self.home / "blobs" / "sha256"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def log_path(self) -> Path:
        return self.logs_dir / "svcd.log"

    @property
    def pid_path(self) -> Path:
        return self.home / "svcd.pid"

    @property
    def credentials_path(self) -> Path:
        return self.home / "credentials"

    @property
    def sandbox_socket_path(self) -> Path:
        """Mounted into sandboxes; only sandbox tokens are accepted on it, even with auth disabled."""
        assert self.socket_path is not None
        return self.socket_path.parent / "sandbox.sock"

    @property
    def workspaces_dir(self) -> Path:
        return self.home / "workspaces"
