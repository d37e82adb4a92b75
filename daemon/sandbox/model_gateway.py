"""The per-sandbox model gateway: a boot extension that starts `programs/model_gateway.py` in its own
container on the sandbox's network (alias `svc-models`), points the agent's model SDKs at it, and
follows the calls it records.

Why a gateway and not the key in the agent's environment: the agent never holds the provider key
(it gets a per-sandbox token that only this gateway accepts), every call is seen, priced and
counted against the run's budget whatever language the agent is written in, and every answer is
recorded so a failed run replays on the same answers (`mode: replay`, no upstream connection).

Why base-URL variables and not TLS interception: the OpenAI and Anthropic SDKs (Python, Node, Go)
and the coding CLIs built on them read `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`; intercepting TLS
would need a CA in every trust store of every image (Node and some CLIs keep their own), a proxy
that decrypts every other host too, and a heavier program in the warm pool's path. An agent that
ignores the variables still meets the egress policy: `api.openai.com` is denied unless allowed.

Lifecycle, shaped for the warm pool: the container starts with the sandbox (`on_network`, pooled
ahead of any run) and waits for its configuration file; the file, with the provider keys, the
budget and the recording to replay, is written when a run claims the sandbox (`on_services`), and
the daemon waits until the gateway listens. The keys were split off the agent's secrets by the
`resolve_secrets` boot step (`sb.model_keys`).

Each call the gateway finishes is one JSON line in `out/calls.jsonl`; `GatewayTail` reads them,
keeps the run's spend and any refusal (`budget_exceeded`, `replay_diverged`) in the extension
state, and hands each line to `on_call` (the trace ingest, daemon/traces/gateway.py).

On a swarm (SERVICE_ENGINE=swarm) the gateway is one more service of the sandbox's set, on the
sandbox's overlay beside the agent, and nodes share no filesystem with svcd: each provider key is
a Swarm secret of that service (the file /run/secrets/key-<provider>, named by `key_file` in the
configuration; `docker service inspect` shows the secret's name, never its value), the
configuration (token, budget, prices; no key) and the recording to replay are copied into the
container at claim, and `out/` is a collected mirror (engine/swarm/mirror.py): the driver brings the
records back after each command, as it does the proxies' audit lines, and every REMOTE_REFRESH_S
while the agent runs. Budgets are the gateway's own, replay reads the same recording: both behave
as on the local engine.
"""
from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from daemon.sandbox.boot import BootExtension, BootHost
from daemon.sandbox.engine import ContainerInfo, ContainerSpec
from daemon.sandbox.models import BootFailure
from daemon.sandbox.runtime import SandboxRuntime
from daemon.sandbox.services import PROGRAMS_DIR, PYTHON_IMAGE

if TYPE_CHECKING:
    from daemon.config import Settings

log = logging.getLogger("svcd.sandbox")

STATE = "models"
GATEWAY_ALIAS = "svc-models"
GATEWAY_PORT = 8480
READY_S = 20.0
TAIL_INTERVAL_S = 0.1
RECORD_FILE = "out/calls.jsonl"
# Started with the sandbox (ahead of any run in the warm pool), the gateway listens at once and
# serves once its configuration is renamed into place at claim; it then creates READY_FILE.
READY_FILE = "ready"
OPEN_WAIT_S = 3.0  # how long the run's end waits for the records of calls still in flight
REMOTE_REFRESH_S = 0.5  # on a swarm: how often the records are brought back while the agent runs
KEY_DIR = "/run/secrets"  # on a swarm: where the gateway's container finds its keys (Swarm secrets)
REMOTE_DIR = "/svc-gateway"  # in the gateway's container


OnCall = Callable[[SandboxRuntime, dict[str, Any]], Any]


def agent_env(token: str) -> dict[str, str]:
    """What the agent's SDKs read: the gateway's address and the sandbox's token as their key."""
    base = f"http://{GATEWAY_ALIAS}:{GATEWAY_PORT}"
    return {
        "OPENAI_BASE_URL": f"{base}/openai", "OPENAI_API_BASE": f"{base}/openai", "OPENAI_API_KEY": token,
        "ANTHROPIC_BASE_URL": f"{base}/anthropic", "ANTHROPIC_API_KEY": token,
        "SERVICE_MODEL_GATEWAY": base,
    }


def _no_proxy(env: dict[str, str]) -> None:
    """The egress proxy (when there is one) must not see the calls to the gateway."""
    for name in ("NO_PROXY", "no_proxy"):
        if name in env and GATEWAY_ALIAS not in env[name].split(","):
            env[name] = f"{env[name]},{GATEWAY_ALIAS}"


class GatewayState:
    """What the daemon knows of one sandbox's gateway while it runs."""

    def __init__(self, directory: Path, token: str):
        self.directory = directory
        self.token = token
        self.container: asyncio.Task | None = None
        self.outer_network: str | None = None
        self.mode = "live"
        self.recording: str | None = None  # digest of the recording replayed
        self.calls = 0
        self.replayed = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0
        self.unpriced = 0
        self.estimated = 0  # calls counted with an estimate: the provider reported no usage
        self.highest_priced = 0  # calls of a model in no table, counted at the highest known price
        self.truncated = 0  # calls recorded as metadata only (the recording reached its size cap)
        self.open: dict[Any, dict[str, Any]] = {}  # admitted calls with no record yet (seq -> admission line)
        self.unfinished = 0  # calls still open when the agent was done: counted at what they held
        self.provider_errors = 0  # answers the provider failed (5xx, 429, unreachable): not the agent's doing
        self.refused: dict[str, Any] | None = None  # the first refusal (budget, divergence)
        self.tail: GatewayTail | None = None
        # On a swarm: brings the records back from the gateway's node (None: they are on this host).
        self.refresh: Callable[[], Awaitable[None]] | None = None
        self.key_files: dict[str, str] = {}  # on a swarm: provider -> its key's file in the container

    @property
    def record_path(self) -> Path:
        return self.directory / RECORD_FILE

    def spend(self) -> dict[str, Any]:
        return {"calls": self.calls, "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cost_usd": round(self.cost_usd, 6), "unpriced_calls": self.unpriced,
                "estimated_calls": self.estimated, "highest_priced_calls": self.highest_priced,
                "truncated_calls": self.truncated, "unfinished_calls": self.unfinished}

    def count(self, line: dict[str, Any]) -> None:
        refused = line.get("refused")
        if line.get("truncated"):
            self.truncated += 1
        if isinstance(refused, dict):
            if self.refused is None and refused.get("reason") != "request_too_large":  # the agent's to handle
                self.refused = refused
            return
        if line.get("usage_estimated"):
            self.estimated += 1
        if line.get("priced_as") == "highest_known" and isinstance(line.get("cost_usd"), (int, float)):
            self.highest_priced += 1
        self.calls += 1
        status = line.get("status")
        error_type = str((line.get("error") or {}).get("type") or "")
        if (isinstance(status, int) and (status >= 500 or status == 429)) or error_type.startswith("upstream"):
            self.provider_errors += 1
        if line.get("replayed"):
            self.replayed += 1
        usage = line.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.output_tokens += int(usage.get("output_tokens") or 0)
        cost = line.get("cost_usd")
        if isinstance(cost, (int, float)):
            self.cost_usd += float(cost)
        elif line.get("status") == 200:
            self.unpriced += 1


class GatewayTail:
    """Reads the lines the gateway appends to its record file (complete lines only). The reading
    and JSON decoding run in a worker thread (a line may hold megabytes of request: the event loop
    never waits on it); the lines are counted and handed on, in order, on the event loop."""

    def __init__(self, state: GatewayState, on_line: Callable[[dict[str, Any]], None]):
        self.state = state
        self.on_line = on_line
        self.offset = 0
        self.partial = b""
        self.task: asyncio.Task | None = None
        self.ready: collections.deque[dict[str, Any]] = collections.deque()
        self._lock = threading.Lock()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        fetched = 0.0
        while True:
            if self.state.refresh is not None and time.monotonic() - fetched >= REMOTE_REFRESH_S:
                fetched = time.monotonic()
                await fetch(self.state)
            try:
                await asyncio.to_thread(self._fill)
                self._drain()
            except Exception:
                log.exception("reading the model gateway's records in %s failed", self.state.directory)
            await asyncio.sleep(TAIL_INTERVAL_S)

    def _fill(self) -> None:
        """Decode the lines appended since the last read into `ready` (any thread)."""
        with self._lock:
            path = self.state.record_path
            try:
                size = path.stat().st_size
                if size <= self.offset:
                    return
                with open(path, "rb") as fh:
                    fh.seek(self.offset)
                    data = fh.read(size - self.offset)
            except OSError:
                return
            self.offset += len(data)
            data = self.partial + data
            *lines, self.partial = data.split(b"\n")
            for raw in lines:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict):
                    self.ready.append(line)

    def _drain(self) -> int:
        n = 0
        while self.ready:
            line = self.ready.popleft()
            seq = line.get("seq")
            if line.get("open"):
                self.state.open[seq] = line
                continue
            self.state.open.pop(seq, None)
            self.state.count(line)
            self.on_line(line)
            n += 1
        return n

    def poll(self) -> int:
        """Read and hand on every complete line so far (on the event loop: the run's end)."""
        self._fill()
        return self._drain()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        self.poll()


async def fetch(state: GatewayState) -> None:
    """On a swarm: bring the records written on the gateway's node back to this host (a gateway that
    is gone leaves what was brought back before)."""
    if state.refresh is None:
        return
    try:
        await state.refresh()
    except Exception as exc:
        log.debug("bringing back the model gateway's records in %s failed: %s", state.directory, exc)


def state_of(sb: SandboxRuntime) -> GatewayState | None:
    state = sb.extension_state.get(STATE)
    return state if isinstance(state, GatewayState) else None


def flush(sb: SandboxRuntime) -> GatewayState | None:
    """Read what the gateway recorded so far (right after the agent exits); its state."""
    state = state_of(sb)
    if state is not None and state.tail is not None:
        state.tail.poll()
    return state


async def settle_open(sb: SandboxRuntime, wait_s: float = OPEN_WAIT_S) -> GatewayState | None:
    """Once the agent is done: wait (at most `wait_s`) for the record of every call still open (a
    stream the agent left ends at the gateway's next write to it); one still open then is counted
    at what it held (its prompt and max_tokens, priced), so leaving never spends for free."""
    state = state_of(sb)
    if state is not None and state.refresh is not None:
        await fetch(state)
    state = flush(sb)
    if state is None or state.tail is None:
        return state
    deadline = time.monotonic() + wait_s
    while state.open and time.monotonic() < deadline:
        await asyncio.sleep(TAIL_INTERVAL_S / 2 if state.refresh is None else REMOTE_REFRESH_S / 2)
        await fetch(state)
        state.tail.poll()
    for line in state.open.values():
        state.calls += 1
        state.unfinished += 1
        state.estimated += 1
        state.input_tokens += int(line.get("held_tokens") or 0)
        cost = line.get("held_cost_usd")
        state.cost_usd += float(cost) if isinstance(cost, (int, float)) else 0.0
    state.open.clear()
    return state


def pricing_table() -> dict[str, list[float | None]]:
    """The daemon's prices (built in, plus SERVICE_PRICING_FILE's), by normalised model name."""
    from daemon.traces.pricing import PRICES

    return {name: [price.input, price.output, price.cached] for name, price in PRICES.items()}


def pricing_aliases() -> dict[str, str]:
    from daemon.traces.pricing import ALIASES, PRICES

    return {name: target for name, target in ALIASES.items() if target in PRICES}


class ModelGatewayExtension(BootExtension):
    """Registered on the manager by the trace ingest (daemon/traces/gateway.py), which gives
    `on_call`; `replay_of(sb)` answers the digest of the recording a run replays (None: live)."""

    def __init__(self, settings: Settings | None, on_call: OnCall | None = None,
                 replay_of: Callable[[SandboxRuntime], Any] | None = None,
                 recording_path: Callable[[str, str], Path | None] | None = None):
        self.settings = settings
        self.on_call = on_call
        self.replay_of = replay_of
        self.recording_path = recording_path

    async def on_network(self, manager: BootHost, sb: SandboxRuntime, agent: ContainerSpec) -> None:
        models = getattr(sb.spec, "models", None) if sb.spec is not None else None
        if models is None:
            return
        directory = sb.runtime_dir / "gateway"
        (directory / "out").mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        state = GatewayState(directory, "svc-gw-" + secrets.token_urlsafe(24))
        sb.extension_state[STATE] = state
        agent.env.update(agent_env(state.token))
        _no_proxy(agent.env)
        state.container = manager.start_alongside(sb, self._start(manager, sb, state))

    async def _start(self, manager: BootHost, sb: SandboxRuntime, state: GatewayState) -> Any:
        from daemon.sandbox.network import allow_private

        outer = f"svc-{sb.id}-models"
        state.outer_network = outer  # before creating it: a cancelled boot still removes it
        await manager.driver.create_network(outer, manager.labels(sb, role="network"), internal=False)
        if manager.firewall.enabled and not allow_private(self.settings or manager.settings):
            await manager.firewall.protect(await manager.driver.network_bridge(outer), sb.id, manager.daemon_id)
        swarm = manager.driver.runtime == "swarm"
        # On a swarm only `out/` comes back to this host (the configuration goes in at claim: no key in it).
        work = {str(state.directory / "out"): (f"{REMOTE_DIR}/out", "rw")} if swarm else \
            {str(state.directory): (REMOTE_DIR, "rw")}
        spec = ContainerSpec(
            name=f"svc-{sb.id}-models", image=PYTHON_IMAGE, command=["python3", "-u", "/svc-programs/model_gateway.py"],
            env={"SVC_GATEWAY_CONFIG_FILE": f"{REMOTE_DIR}/config.json", "SVC_GATEWAY_LISTEN": f"0.0.0.0:{GATEWAY_PORT}"},
            labels={"svc.role": "models"}, network=sb.network, aliases=[GATEWAY_ALIAS], init=True,
            binds={str(PROGRAMS_DIR): ("/svc-programs", "ro"), **work},
            hostname=GATEWAY_ALIAS, nano_cpus=int(1e9), mem_limit=256 * 1024**2, pids_limit=256,
            extra_networks={outer: []},
        )
        if swarm:
            info = await self._start_on_swarm(manager, sb, state, spec)
        else:
            info = await manager.run_aux_container(sb, spec, inspect=True)
        await _wait_listening(manager, info)
        return info

    async def _start_on_swarm(self, manager: BootHost, sb: SandboxRuntime, state: GatewayState,
                              spec: ContainerSpec) -> ContainerInfo:
        """The gateway as a service of the sandbox's set, each provider key a Swarm secret of it. A
        swarm has no warm pool, so the run's keys are resolved by now (`resolve_secrets` came first)."""
        secrets: dict[str, bytes] = {}
        for name, provider in sb.spec.models.providers.items():
            key = sb.model_keys.get(provider.key)
            if key:
                secrets[f"key-{name}"] = key.encode()
                state.key_files[name] = f"{KEY_DIR}/key-{name}"
        spec.labels = {**spec.labels, **manager.labels(sb, role="models")}
        driver: Any = manager.driver  # SwarmDriver: run_container takes the secrets, collect brings `out/` back
        info: ContainerInfo = await driver.run_container(spec, inspect=True, secrets=secrets)
        sb.aux.append(info)

        async def refresh() -> None:
            await driver.collect(info.id)

        state.refresh = refresh
        return info

    async def on_services(self, manager: BootHost, sb: SandboxRuntime) -> None:
        state = state_of(sb)
        if state is None:
            return
        models = sb.spec.models
        remote = state.refresh is not None  # on a swarm: nothing of this host's disk reaches the gateway
        replay = await self.replay_of(sb) if self.replay_of is not None else None
        replay_file = None
        source = None
        if replay:
            source = self.recording_path(sb.tenant_id, replay) if self.recording_path is not None else None
            if source is None or not source.is_file():
                raise BootFailure("models", f"the model recording {replay} this run replays is gone")
            if not remote:
                await asyncio.to_thread(_copy, source, state.directory / "replay.jsonl")
            state.mode, state.recording, replay_file = "replay", replay, f"{REMOTE_DIR}/replay.jsonl"
        providers: dict[str, dict[str, str]] = {}
        for name, provider in models.providers.items():
            key = sb.model_keys.get(provider.key)
            if not key and not replay:
                raise BootFailure("models", f"models.providers.{name}: secret '{provider.key}' has no value")
            if remote and key:
                if name not in state.key_files:
                    raise BootFailure("models", f"models.providers.{name}: its key reached no Swarm secret of the gateway")
                providers[name] = {"base_url": models.base_url(name), "key_file": state.key_files[name]}
            else:
                providers[name] = {"base_url": models.base_url(name), "key": key or ""}
        from daemon.sandbox.network import allow_private, host_addresses

        settings = self.settings or manager.settings
        config = {
            "listen": f"0.0.0.0:{GATEWAY_PORT}", "token": state.token, "providers": providers,
            "mode": state.mode, "replay_file": replay_file, "record_file": f"{REMOTE_DIR}/{RECORD_FILE}",
            "ready_file": f"{REMOTE_DIR}/{READY_FILE}",
            "budget": models.budget.model_dump(exclude_none=True), "pricing": pricing_table(),
            "pricing_aliases": pricing_aliases(),
            "max_body": int(getattr(settings, "gateway_max_body", 4 * 1024**2)),
            "max_recording": int(getattr(settings, "gateway_max_recording", 64 * 1024**2)),
            "allow_private": allow_private(settings),
            "host_addresses": await asyncio.to_thread(host_addresses),
        }
        info = await state.container if state.container is not None else None
        if info is None:
            raise BootFailure("models", "the model gateway's container did not start")
        if remote:
            if source is not None:
                data = await asyncio.to_thread(source.read_bytes)
                await manager.driver.put_file(info.id, f"{REMOTE_DIR}/replay.jsonl", data, 0o600)
            await _configure_remote(manager, info, json.dumps(config).encode())
        else:
            await asyncio.to_thread(_write_private, state.directory / "config.json", json.dumps(config).encode())
            await _wait_configured(manager, info, state.directory / READY_FILE)
        state.tail = GatewayTail(state, lambda line: self._called(sb, line))
        state.tail.start()
        manager.status(sb, step="models_ready", mode=state.mode, providers=sorted(providers))

    def _called(self, sb: SandboxRuntime, line: dict[str, Any]) -> None:
        if self.on_call is not None:
            try:
                self.on_call(sb, line)
            except Exception:
                log.exception("sandbox %s: a model call record could not be ingested", sb.id)

    async def on_destroy(self, manager: BootHost, sb: SandboxRuntime) -> None:
        state = state_of(sb)
        if state is None:
            return
        if state.tail is not None:
            await state.tail.stop()
        try:  # the keys leave the host's disk with the sandbox
            (state.directory / "config.json").unlink(missing_ok=True)
        except OSError:
            pass
        if state.container is not None and not state.container.done():  # torn down while it was starting
            state.container.cancel()
            await asyncio.gather(state.container, return_exceptions=True)
        if state.outer_network:
            try:  # before its network can go; by name, since it may not have reported back yet
                await manager.driver.remove_container(f"svc-{sb.id}-models")
            except Exception as exc:
                if "no such container" not in str(exc).lower() and "not found" not in str(exc).lower():
                    log.warning("removing the model gateway of %s failed: %s", sb.id, exc)
            try:
                await manager.driver.remove_network(state.outer_network)
            except Exception as exc:
                log.warning("removing network %s failed: %s", state.outer_network, exc)


def _copy(source: Path, target: Path) -> None:
    target.write_bytes(source.read_bytes())


def _write_private(path: Path, data: bytes) -> None:
    """Whole or not at all: the gateway starts reading the moment the name appears."""
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(partial, path)


async def _configure_remote(manager: BootHost, info: ContainerInfo, config: bytes) -> None:
    """On a swarm: copy the configuration into the gateway's container, rename it into place (whole
    or not at all, as `_write_private`) and wait there until the gateway took it."""
    partial = f"{REMOTE_DIR}/config.json.partial"
    await manager.driver.put_file(info.id, partial, config, 0o600)
    polls = int(READY_S / 0.02)
    script = (f"mv -f {partial} {REMOTE_DIR}/config.json && i=0; while [ ! -e {REMOTE_DIR}/{READY_FILE} ]; do "
              f"i=$((i+1)); [ $i -gt {polls} ] && exit 1; sleep 0.02; done")
    raw = await manager.driver.exec(info.id, ["sh", "-c", script], watchdog_s=READY_S + 10)
    if raw.exit_code != 0:
        logs = (await manager.driver.logs(info.id, tail=20)).strip()
        raise BootFailure("models", "the model gateway did not take its configuration"
                                    + (f"; last log lines:\n{logs}" if logs else ""))


async def _wait_configured(manager: BootHost, info: ContainerInfo, ready: Path) -> None:
    deadline = time.monotonic() + READY_S
    polls = 0
    while not ready.exists():
        polls += 1
        if polls % 50 == 0 or time.monotonic() > deadline:
            running = await manager.driver.container_state(info.id)
            if running is None or not running.get("Running") or time.monotonic() > deadline:
                logs = (await manager.driver.logs(info.id, tail=20)).strip()
                raise BootFailure("models", "the model gateway did not take its configuration"
                                            + (f"; last log lines:\n{logs}" if logs else ""))
        await asyncio.sleep(0.002)


async def _wait_listening(manager: BootHost, info: ContainerInfo) -> None:
    deadline = time.monotonic() + READY_S
    driver = manager.driver
    while True:
        ports = driver.listening_ports(info.pid) if info.pid else None
        if ports is not None and GATEWAY_PORT in ports:
            return
        if ports is None:
            raw = await driver.exec(info.id, ["sh", "-c", f"nc -z 127.0.0.1 {GATEWAY_PORT}"], watchdog_s=5)
            if raw.exit_code == 0:
                return
        running = await driver.container_state(info.id)
        if running is None or not running.get("Running") or time.monotonic() > deadline:
            logs = (await driver.logs(info.id, tail=20)).strip()
            raise BootFailure("models", f"the model gateway did not start listening on port {GATEWAY_PORT}"
                                        + (f"; last log lines:\n{logs}" if logs else ""))
        await asyncio.sleep(0.005)
