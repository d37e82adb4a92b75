"""The environment variable reference (docs/reference/environment.md), from the code: every
`SERVICE_*` name that daemon/, client/ or tui/ reads from the environment (os.environ, os.getenv,
the settings helpers of daemon/config.py and the other settings modules, client.config's lookup),
found by walking their syntax trees, with its default where the code gives one literally, where it
is read, and what it does (DESCRIPTIONS, else the comment or docstring line that names it)."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import refcommon as common

SCRIPT = "env_ref.py"
PACKAGES = ("daemon", "client", "tui")
NAME = re.compile(r"SERVICE_[A-Z0-9_]+")
# Calls that take an environment name first but write or pass it on instead of reading it.
NOT_READS = {"setdefault", "pop", "write", "append", "add", "update", "startswith", "replace", "format", "join"}

# What each setting does, where the code's own comment does not say it in a line.
DESCRIPTIONS = {
    "SERVICE_HOME": "Where the daemon keeps its state: `svc.db` (SQLite), blobs, logs, the credentials file, sandbox evidence.",
    "SERVICE_SOCKET": "The daemon's Unix socket (mode 0600); default `$SERVICE_HOME/svcd.sock`.",
    "SERVICE_PORT": "The TCP port svcd also listens on, on 127.0.0.1.",
    "SERVICE_AUTH_DISABLED": "`1`: no API key needed (trusted local use). The sandbox socket still takes only sandbox tokens.",
    "SERVICE_RATE_LIMIT": "Requests per second per API key and per tenant (the burst is twice as many); over it: 429 with `Retry-After`.",
    "SERVICE_API_KEY": "The API key the CLI, TUI, MCP server and tracing SDK send; after `--api-key`, before `.env` and the saved key.",
    "SERVICE_BASE_URL": "The daemon's address for the client: `http://host:port` or `unix:///path.sock`.",
    "SERVICE_TIMEOUT": "The client's HTTP timeout: seconds or a duration like `30s`, `2m`.",
    "SERVICE_MAX_SANDBOXES": "Sandboxes alive at once (pooled ones included); one more is 503 `at_capacity`.",
    "SERVICE_MAX_BODY_BYTES": "The largest JSON request body (413 above it).",
    "SERVICE_MAX_UPLOAD_BYTES": "The largest upload (agent bundles, workspace files).",
    "SERVICE_IDEMPOTENCY_TTL": "Seconds an `Idempotency-Key`'s answer is replayed.",
    "SERVICE_STREAM_TIMEOUT": "Seconds after which every event stream ends (and an NDJSON body still being sent is cut).",
    "SERVICE_SANDBOX_FIREWALL": "`off`: no host firewall for sandbox networks (sandboxes can then reach the host; a warning is logged).",
    "SERVICE_IPTABLES": "The iptables binary the host firewall uses.",
    "SERVICE_IP6TABLES": "The ip6tables binary; default the one beside iptables.",
    "SERVICE_WORKSPACE_QUOTA": "`off`: no loop-mounted ext4 per workspace; `resources.disk` is then only checked after commands.",
    "SERVICE_ENGINE": "Where sandboxes run: `docker` (the local engine) or `swarm`.",
    "SERVICE_SWARM_MANAGER": "The swarm manager's engine URL (`unix://`, `tcp://` with TLS, or `ssh://user@host`).",
    "SERVICE_SWARM_NODES": "`hostname=engine-url,...`: exec and files go to the node running each task.",
    "SERVICE_SWARM_IMAGES": "`image-the-spec-names=registry/repo@sha256:...,...`: the images nodes pull, by digest.",
    "SERVICE_SWARM_CERT_PATH": "A directory with `ca.pem`, `cert.pem`, `key.pem` for mutual TLS to `tcp://` engines (required for them).",
    "SERVICE_SWARM_SSH_CONFIG": "The ssh_config file used for `ssh://` engines (key, known_hosts, user, port).",
    "SERVICE_SWARM_REGISTRY": "`host:port` of the swarm's registry, where Dockerfile bases built here are pushed for the nodes to pull by digest (default: the registry of `SERVICE_SWARM_IMAGES`).",
    "SERVICE_CHAT_CLIENT_ID": "The Slack app's OAuth client id.",
    "SERVICE_CHAT_CLIENT_SECRET": "The Slack app's OAuth client secret.",
    "SERVICE_CHAT_SIGNING_SECRET": "The Slack app's request signing secret (events and interactions are verified with it).",
    "SERVICE_CHAT_BOT_TOKEN": "A server-wide bot token; posts only for the tenant `SERVICE_CHAT_BOT_TENANT` names.",
    "SERVICE_CHAT_BOT_TENANT": "The one tenant `SERVICE_CHAT_BOT_TOKEN` posts for (default the admin tenant `default`).",
    "SERVICE_CHAT_API_BASE": "The Slack Web API base (a proxy, or a test server).",
    "SERVICE_CHAT_AUTHORIZE_URL": "The Slack OAuth authorize page.",
    "SERVICE_CHAT_LINK_BASE": "The address trace links in chat messages open; default `http://127.0.0.1:<port>`.",
    "SERVICE_LLM_BASE_URL": "The investigation agent's OpenAI-compatible API root (ending in `/v1`); default `SERVICE_JUDGE_BASE_URL`.",
    "SERVICE_LLM_API_KEY": "The investigation agent's API key; default `SERVICE_JUDGE_API_KEY`.",
    "SERVICE_LLM_MODEL": "The investigation agent's model; default `SERVICE_JUDGE_MODEL`.",
    "SERVICE_JUDGE_BASE_URL": "LLM judges' OpenAI-compatible API root (ending in `/v1`).",
    "SERVICE_JUDGE_API_KEY": "LLM judges' API key (else the tenant's dashboard secret of that name).",
    "SERVICE_JUDGE_MODEL": "LLM judges' default model.",
    "SERVICE_JUDGE_TIMEOUT_S": "Seconds per judge attempt.",
    "SERVICE_JUDGE_BACKOFF_S": "The first retry delay of a judge call (doubling, with jitter).",
    "SERVICE_POOL_SIZE": "Warm sandboxes kept booted per shape (`0`: no pool).",
    "SERVICE_POOL_MAX_TOTAL": "Warm sandboxes across all shapes.",
    "SERVICE_POOL_IDLE_S": "Seconds a shape may go unused before its pool is drained.",
    "SERVICE_POOL_MIN_FREE_MB": "Free memory (MiB) below which the pool is not refilled.",
    "SERVICE_NETWORK_POOL": "Idle sandbox networks kept (internal, firewalled, nothing attached) for the next sandbox "
                            "instead of removed; 0: each sandbox creates and removes its own.",
    "SERVICE_REAP_INTERVAL": "Seconds between sweeps removing this daemon's engine objects and sandbox directories that no live, booting or pooled sandbox owns (`0`: only at start and stop).",
    "SERVICE_REAP_GRACE": "Seconds an unowned engine object or sandbox directory must have existed before a sweep removes it.",
    "SERVICE_BUILD_CA_BUNDLE": "The CA bundle every `RUN` of a Dockerfile base sees as a build secret over `/etc/ssl/certs/ca-certificates.crt` (never in the image); `off`: none.",
    "SERVICE_BUILD_NETWORK": "`none` (default): Dockerfile `RUN` steps have no network; `bridge`: the engine's default bridge (reaches this host's docker0 address). A spec cannot open it.",
    "SERVICE_BUILD_REGISTRIES": "Comma-separated registries a build's `FROM`/`COPY --from` and a spec's `base`/service images may be pulled from (default none: local images only; `localhost` and address literals never).",
    "SERVICE_BUILD_TIMEOUT": "Seconds a Dockerfile build may take before it is stopped.",
    "SERVICE_BUILD_MEMORY": "Memory cap (bytes or a size) written to the engine's BuildKit cgroup, shared by all its builds.",
    "SERVICE_BUILD_PIDS": "Process cap of the engine's BuildKit cgroup, shared by all its builds.",
    "SERVICE_BUILD_CPUS": "CPU cap (cores) of the engine's BuildKit cgroup, shared by all its builds.",
    "SERVICE_GATEWAY_MAX_BODY": "The largest request body the model gateway forwards (a size); larger: 413, recorded as metadata only.",
    "SERVICE_GATEWAY_MAX_RECORDING": "The size of a run's model recording past which calls are recorded as truncated.",
    "SERVICE_DOCKER_CLI": "The docker CLI that builds Dockerfile bases with BuildKit (empty: the first of `docker` with the buildx plugin or a 20.10 CLI).",
    "SERVICE_OUTBOUND_ALLOW_PRIVATE": "`on`: webhook, alert and default-route URLs may name loopback, private and this host's addresses (link-local and metadata addresses stay refused).",
    "SERVICE_MAX_MEMORY": "The most memory a spec may ask for (`resources.memory`); over it: 400 naming the field.",
    "SERVICE_MAX_DISK": "The most workspace disk a spec may ask for (`resources.disk`).",
    "SERVICE_MAX_PIDS": "The most processes a spec may ask for (`resources.pids`).",
    "SERVICE_MAX_CPUS": "The most CPUs a spec may ask for; default the host's CPU count.",
    "SERVICE_MAX_TIMEOUT": "The longest timeout a spec may set (every `timeout` in it, the agent's included).",
    "SERVICE_MAX_RUNNING_PER_TENANT": "Jobs one tenant may have running at once once the daemon has more than one tenant; `0`: half the global limit, at least 1.",
    "SERVICE_MAX_SPEC_BYTES": "The largest spec YAML (413 above it).",
    "SERVICE_MAX_SPECS_PER_TENANT": "Spec ids per tenant (409 above it).",
    "SERVICE_MAX_SPEC_VERSIONS": "Versions of one spec id (409 above it).",
    "SERVICE_MAX_STREAMS_PER_TENANT": "Open event streams per tenant (429 above it).",
    "SERVICE_MAX_KEYS_PER_TENANT": "API keys per tenant (409 above it).",
    "SERVICE_MAX_CONCURRENT_RUNS": "The job engine's global limit (runs, experiment scenarios, scoring at once); wins over what the engine derives.",
    "SERVICE_RUN_CONCURRENCY": "A cap on standalone runs at once, under the global limit.",
    "SERVICE_MAX_AGENT_VERSIONS": "Versions kept per agent snapshot name.",
    "SERVICE_ARTIFACTS_DIR": "Where teardown exports are written; default `$SERVICE_HOME/artifacts`.",
    "SERVICE_CHECK_TIME_LIMIT_S": "Seconds one agent-controlled scoring step (a regex, a parse) may take off the event loop.",
    "SERVICE_EGRESS_AUDIT_CAP": "Bytes of egress audit one sandbox may write; past it the proxy refuses every request.",
    "SERVICE_EGRESS_ALLOW_PRIVATE": "`1`: hosts a spec allows may resolve to private addresses (tests only).",
    "SERVICE_FAKETIME_LIB": "Path of libfaketime when it is not in the usual place (frozen clocks).",
    "SERVICE_STATIC_DNS_POOL": "The address pool `determinism.dns: static` sandboxes take their subnets from.",
    "SERVICE_FS_WATCHES_PER_SANDBOX": "inotify watches one sandbox's file-system audit may hold.",
    "SERVICE_PRICING_FILE": "A JSON file of model prices that overrides the built-in table (trace costs).",
    "SERVICE_RESPONSE_VALIDATION": "`warn`: an answer that does not match its contract model is logged and sent; default `strict` answers 500.",
    "SERVICE_SANDBOX_TRACING": "`0`: sandboxes get no sandbox socket (no traces from inside the agent).",
    "SERVICE_TRAJECTORY_URL_TTL_S": "Seconds a run's signed trajectory URL stays valid.",
    "SERVICE_WEBHOOK_BACKOFF_S": "The first retry delay of a webhook delivery (doubling, with jitter).",
    "SERVICE_WEBHOOK_TIMEOUT_S": "Seconds per webhook delivery attempt.",
    "SERVICE_SMTP_URL": "`smtp://host:port` (`smtps://` for TLS; `user:password@` optional) for `notify: email` alerts.",
    "SERVICE_SMTP_FROM": "The From address of alert e-mails.",
    "SERVICE_ALERT_EMAIL_TO": "Where a spec's `notify: email` alerts go.",
    "SERVICE_ALERT_RETRY_BASE_S": "The first retry delay of an alert notification (doubling, with jitter).",
    "SERVICE_ALERT_TIMEOUT_S": "Seconds per alert delivery attempt.",
    "SERVICE_ALERT_CHAT_RETRY_S": "How often a waiting chat or e-mail notification looks again for its channel.",
    "SERVICE_DEBUG": "`1`: `svc` prints the traceback of an unexpected error instead of one line.",
    "SERVICE_NO_AUTOSTART": "`1`: `svc` does not start a local daemon when none answers.",
    "SERVICE_NO_AUTO_UPDATE": "`1`: no daily check for a newer release.",
    "SERVICE_UPDATE_INDEX": "The package index `svc update` and the daily check use (there is no default).",
    "SERVICE_THEME": "The TUI theme: `dark`, `light`, `high-contrast` or one of your own.",
    "SERVICE_THEMES_DIR": "A directory of extra TUI themes (`.tcss` + `.toml`).",
    "SERVICE_TRACE_FLUSH_TIMEOUT": "Seconds the tracing SDK waits at exit to send what it buffered.",
    "SERVICE_SEED": "Inside a sandbox: the run's seed; Python's `random` is seeded from it.",
    "SERVICE_SANDBOX_ID": "Inside a sandbox: its id; the tracing SDK tags what it sends with it.",
    "SERVICE_TRACE_ID": "Fixes the trace id of the tracing SDK's top-level spans.",
    "SERVICE_SANDBOX_TOKEN": "Inside a sandbox: the token the tracing SDK sends over the sandbox socket.",
}

BOTH = "Both svcd and svc"
WHERE = (
    ("daemon/sandbox/programs/", "Inside a sandbox (set by the daemon, read by programs it runs there)"),
    ("", BOTH),
    ("client/tracing/", "The tracing SDK (in your agent's process)"),
    ("daemon/", "svcd (the daemon): set where it starts"),
    ("client/", "svc (the CLI, the MCP server)"),
    ("tui/", "svc tui"),
)


@dataclass
class Variable:
    name: str
    places: list[str] = field(default_factory=list)
    default: str | None = None
    comment: str = ""


def _literal(node: ast.AST | None) -> str | None:
    if node is None:
        return None
    try:
        value = eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}}, {})  # constants and arithmetic only
    except Exception:
        text = ast.unparse(node)
        return None if "SERVICE_" in text or "environ" in text else text
    if isinstance(value, bool):
        return "on" if value else "off"
    return repr(value) if not isinstance(value, str) else (value if value else None)


def _comment(lines: list[str], lineno: int, name: str) -> str:
    """A comment line that names the variable just above its read, else a docstring line that does."""
    for index in range(lineno - 2, max(-1, lineno - 6), -1):
        text = lines[index].strip()
        if not text.startswith("#"):
            break
        if name in text:
            return text.lstrip("# ").strip()
    for text in lines:
        stripped = text.strip()
        if stripped.startswith(name + " ") and not stripped.startswith(name + " ="):
            return stripped[len(name):].strip()
    return ""


def _reads(path: Path) -> list[tuple[str, int, ast.AST | None]]:
    _, tree = common.parse(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            value = node.args[0].value
            if not (isinstance(value, str) and NAME.fullmatch(value)):
                continue
            func = node.func
            fn = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if fn in NOT_READS or fn[:1].isupper():
                continue
            out.append((value, node.lineno, node.args[1] if len(node.args) > 1 else None))
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant)
              and isinstance(node.slice.value, str) and NAME.fullmatch(node.slice.value) and "environ" in ast.unparse(node.value)):
            out.append((node.slice.value, node.lineno, None))
    return out


def variables() -> dict[str, Variable]:
    found: dict[str, Variable] = {}
    for package in PACKAGES:
        for path in sorted((common.ROOT / package).rglob("*.py")):
            rel = path.relative_to(common.ROOT).as_posix()
            lines = common.parse(path)[0].splitlines()
            for name, lineno, default in _reads(path):
                var = found.setdefault(name, Variable(name))
                if rel not in var.places:  # files, not lines: the page must not change with every edit above a read
                    var.places.append(rel)
                if var.default is None:
                    var.default = _literal(default)
                if not var.comment:
                    var.comment = _comment(lines, lineno, name)
    return dict(sorted(found.items()))


def _group(var: Variable) -> str:
    if (any(p.startswith("daemon/") and not p.startswith("daemon/sandbox/programs/") for p in var.places)
            and any(p.startswith(("client/", "tui/")) and not p.startswith("client/tracing/") for p in var.places)):
        return BOTH
    for prefix, title in WHERE:
        if prefix and var.places[0].startswith(prefix):
            return title
    return WHERE[-1][1]


def render() -> str:
    found = variables()
    out = [common.header(SCRIPT), "# Environment variables\n",
           "Every `SERVICE_*` setting the code reads, found in `daemon/`, `client/` and `tui/` by "
           "`docs/gen/env_ref.py`. The daemon reads its settings once at start (`daemon/config.py` and a "
           "few settings modules read at use); `svc` reads flag, then environment, then `.env` / `.env.local` "
           "in the current directory, then `$XDG_CONFIG_HOME/svc/config.toml`, then the saved key, then the "
           "defaults. Sizes take `16g`-style values and durations `24h`-style ones where the default is one.\n"]
    groups: dict[str, list[Variable]] = {}
    for var in found.values():
        groups.setdefault(_group(var), []).append(var)
    for _, title in WHERE:
        if title not in groups:
            continue
        out.append(f"## {title}\n")
        rows = [[f"`{v.name}`", f"`{v.default}`" if v.default else "–",
                 DESCRIPTIONS.get(v.name) or v.comment or "–",
                 ", ".join(f"`{p}`" for p in v.places[:3]) + (" …" if len(v.places) > 3 else "")]
                for v in groups[title]]
        out.append(common.table(["Variable", "Default", "What it does", "Read in"], rows))
    return "\n".join(out)
