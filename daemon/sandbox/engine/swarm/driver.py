"""`SandboxDriver` on a Docker Swarm: each container is a 1-replica service, each network an overlay.

Services are created on the manager's engine; once Swarm has placed the task, everything that
touches the container itself (exec, files, logs, state) goes to the engine of the node running
it (`NodeEngine`, a `DockerDriver` on that node's URL). Service names resolve on the sandbox's
overlay through DNS round-robin (`dnsrr`): the kernels we run on may lack IPVS, which the
virtual-IP mode needs. Nodes share no filesystem with svcd: a bind of a host directory becomes
a mirror (mirror.py) kept in step around each command. Nothing is retried forever: a task Swarm cannot place, an image the
registry lacks, a node that stops answering each end the call with `SwarmTaskFailed` or
`NodeLost`, naming the node and the cause, after the service was removed.
"""
from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import logging
import socket
import stat
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar
from urllib.parse import urlparse

from daemon.sandbox.engine import (OUTPUT_CAP_BYTES, ContainerInfo, ContainerSpec, ImageUnavailable, RawExec,
                                   RuntimeUnavailable)
from daemon.sandbox.engine.docker import IMAGE_SEEN_S, DockerDriver
from daemon.sandbox.models import DEFAULT_CPUS, DEFAULT_MEMORY
from daemon.sandbox.engine.swarm.mirror import Mirror, collect_from, pack, pack_all, replace_from, signature
from daemon.sandbox.engine.swarm.placement import NodePlacement, NodeShare
from daemon.sandbox.engine.swarm.settings import EngineClient, SwarmSettings
from daemon.sandbox.engine.swarm.ssh_tunnel import TunnelError, Tunnels

T = TypeVar("T")
log = logging.getLogger("svcd.sandbox.engine.swarm")

# A container spec label that pins the container to the node with `node.labels.svc.node == value`.
PLACE_LABEL = "svc.place"
PLACE_TIMEOUT_S = 10.0  # a task still pending this long: no node can take it
PLACE_WAIT_S = 0.2  # how often a sandbox waiting for a node's room asks again (`_place`)
PLACE_REREAD_S = 0.5  # ... and reads the nodes' tasks again while it waits (one manager call)
START_TIMEOUT_S = 90.0  # pulling an image on a fresh node included
NODE_PROBE_TIMEOUT_S = 2.0
NETWORK_DETACH_S = 30.0
CAPACITY_REFRESH_S = 10.0  # how often the scheduler's limit is read again from the ready nodes
ARCHIVE_CAP_BYTES = 256 * 1024 * 1024
MAX_SECRETS = 64
SECRET_OF_LABEL = "svc.secret-of"  # on each Swarm secret: the service it belongs to
# A container with mirrored binds starts its command only once the mirrors are in (the marker is
# the last thing copied), as a local bind mount is there from the start.
MIRRORED_MARKER = ".svc-mirrored"
MIRROR_WAIT = f'while [ ! -e /{MIRRORED_MARKER} ]; do sleep 0.05; done; exec "$@"'
ENDED = {"failed", "rejected", "shutdown", "complete", "orphaned", "remove"}
# Images svcd builds on its own engine: Dockerfile bases (build.TAG_ROOT) and installed agents' layers
# (agents/installed/layer.REPOSITORY); `ensure_image` pushes them to the swarm's registry.
BUILT_PREFIXES = ("localhost/svc-build/", "localhost/svc-agent/")


class SwarmTaskFailed(Exception):
    """Swarm could not run a container (the message names the node, when there is one, and the cause)."""


class NodeLost(RuntimeUnavailable):
    """The engine of the node running a container does not answer."""


class RemoteEngine(DockerDriver):
    """A `DockerDriver` on an engine of the swarm, reached over mutual TLS or through an ssh tunnel
    (settings.py, ssh_tunnel.py)."""

    def __init__(self, settings: SwarmSettings, url: str, max_workers: int, tunnels: Tunnels):
        super().__init__(max_workers=max_workers, base_url=url)
        self._url = url
        self._options = settings.client_options(url)
        self._tunnels = tunnels if urlparse(url).scheme == "ssh" else None

    def reach(self) -> str:
        """The URL the client connects to: the engine's, or its ssh tunnel's socket (started again
        when it died). RuntimeUnavailable naming the engine and ssh's reason when it cannot."""
        if self._tunnels is None:
            return self._url
        try:
            return self._tunnels.url_for(self._url)
        except TunnelError as exc:
            raise RuntimeUnavailable(str(exc)) from None

    async def _call(self, fn: Callable[..., T], *args: object, critical: bool = False, **kwargs: object) -> T:
        if self._tunnels is None:
            return await super()._call(fn, *args, critical=critical, **kwargs)

        def through_tunnel(*a: object, **k: object) -> T:
            self.reach()
            return fn(*a, **k)
        return await super()._call(through_tunnel, *args, critical=critical, **kwargs)

    def _clients(self):
        with self._lock:
            if self._api is None:
                kwargs: dict[str, Any] = {"max_pool_size": self._max_workers + 4, **self._options}
                target = self.reach()
                try:
                    api = EngineClient(base_url=target, version="auto", timeout=120, **kwargs)
                    exec_api = EngineClient(base_url=target, version=api.api_version, timeout=None, **kwargs)
                    api.ping()
                except Exception as exc:
                    raise RuntimeUnavailable(f"cannot reach the Docker engine at {self._base_url}: {exc}") from exc
                self._api, self._exec_api = api, exec_api
            return self._api, self._exec_api


class NodeEngine(RemoteEngine):
    """One node's engine. Its runaway-exec watchdog never signals a pid: an exec's pid belongs to
    the node's host, not to this one. Commands are bounded by the in-container `timeout` wrapper."""

    runtime = "swarm-node"

    @staticmethod
    def _kill_exec(api: EngineClient, exec_id: str, killed: threading.Event) -> None:
        log.warning("exec %s outlived its watchdog on a swarm node; it ends with its container", exec_id[:12])


class SwarmDriver:
    """`SandboxDriver` on a swarm (see the module docstring). The daemon's workspace seam
    (host_workspace.py) works on the host copy, which the mirror pushes before and pulls after each
    command (mirror.py)."""

    runtime = "swarm"

    def __init__(self, settings: SwarmSettings, max_workers: int = 32,
                 place_timeout_s: float = PLACE_TIMEOUT_S, start_timeout_s: float = START_TIMEOUT_S,
                 capacity_refresh_s: float = CAPACITY_REFRESH_S):
        self.settings = settings
        self._tunnels = Tunnels(settings.ssh_config)
        self._manager = RemoteEngine(settings, settings.manager, max_workers, self._tunnels)
        self._nodes: dict[str, NodeEngine] = {}
        self._node_names: dict[str, str] = {}  # swarm node id -> hostname
        self._placed: dict[str, tuple[str, str]] = {}  # container id -> (node hostname, service id)
        self._mirrors: dict[str, list[Mirror]] = {}  # container id -> host binds kept in step (mirror.py)
        self._mirror_locks: dict[str, asyncio.Lock] = {}
        self._sandbox_of: dict[str, str] = {}  # container id -> its sandbox (label svc.sandbox)
        self._place_timeout_s = place_timeout_s
        self._start_timeout_s = start_timeout_s
        self._capacity_refresh_s = capacity_refresh_s
        self._capacity_task: asyncio.Task | None = None
        self.placement = NodePlacement(capacity_refresh_s)  # which node each sandbox runs on (placement.py)
        self._published: dict[str, str] = {}  # built image tag -> its registry ref by digest (`publish`)
        self._publishing: dict[str, asyncio.Lock] = {}
        self._in_registry: dict[str, float] = {}  # reference by digest -> when the registry last had it
        self._build_api: Any = None
        self._build_lock = threading.Lock()

    # --- plumbing ----------------------------------------------------------------------------

    async def _call(self, fn: Callable[..., T], *args: object, critical: bool = False) -> T:
        return await self._manager._call(fn, *args, critical=critical)

    @property
    def api(self):
        return self._manager.api

    def node_engine(self, node: str) -> NodeEngine:
        url = self.settings.nodes.get(node)
        if url is None:
            raise NodeLost(f"node {node}: SERVICE_SWARM_NODES has no engine URL for it")
        if node not in self._nodes:
            self._nodes[node] = NodeEngine(self.settings, url, max_workers=16, tunnels=self._tunnels)
        return self._nodes[node]

    async def _engine_of(self, container: str) -> tuple[str, NodeEngine]:
        placed = self._placed.get(container)
        if placed is None:
            raise NodeLost(f"container {container[:12]} is not one this driver started")
        node = placed[0]
        try:
            engine = self.node_engine(node)
            await asyncio.to_thread(_probe, node, engine)
        except NodeLost:
            self.placement.lost(node)  # the next sandboxes (a retried run's among them) go elsewhere
            raise
        return node, engine

    async def close(self) -> None:
        if self._capacity_task is not None:
            self._capacity_task.cancel()
        for engine in self._nodes.values():
            await engine.close()
        await self._manager.close()
        if self._build_api is not None:
            self._build_api.close()
        await asyncio.to_thread(self._tunnels.close)

    async def ping(self) -> None:
        info = await self._call(lambda: self.api.info())
        swarm = info.get("Swarm") or {}
        if swarm.get("LocalNodeState") != "active" or not swarm.get("ControlAvailable"):
            raise RuntimeUnavailable(f"{self.settings.manager} is not a swarm manager "
                                     f"(swarm state {swarm.get('LocalNodeState') or 'unknown'})")

    # --- images ------------------------------------------------------------------------------

    def resolve(self, ref: str) -> str:
        """The registry reference by digest the nodes pull for an image a spec names."""
        mapped = self.settings.images.get(ref) or self._published.get(ref)
        if mapped is not None:
            return mapped
        if "@sha256:" in ref:
            return ref
        raise ImageUnavailable(f"{ref} is not in the swarm's registry by digest (SERVICE_SWARM_IMAGES; "
                               "`make swarm-up` pushes the stock images)")

    async def has_image(self, ref: str) -> bool:
        """Whether the swarm's registry maps `ref` to a digest the nodes can pull (nothing asked)."""
        try:
            self.resolve(ref)
        except ImageUnavailable:
            return False
        return True

    async def ensure_image(self, ref: str) -> None:
        if ref.startswith(BUILT_PREFIXES) and ref not in self.settings.images:
            await self.publish(ref)
        target = self.resolve(ref)
        seen = self._in_registry.get(target)
        if seen is not None and time.monotonic() - seen < IMAGE_SEEN_S:
            return

        def check() -> None:
            try:
                self.api.inspect_distribution(target)
            except Exception as exc:
                raise ImageUnavailable(f"{target}: the registry does not have it ({str(exc).splitlines()[0][:200]})") from exc

        await self._call(check)
        self._in_registry[target] = time.monotonic()

    async def publish(self, tag: str) -> str:
        """A Dockerfile base built on svcd's own engine (build.py), in the swarm's registry: pushed
        once from the manager under the same tenant's name and the same content tag, then pulled by
        digest on whichever node runs it; its registry reference by digest. A tag the registry already
        has (built by this or an earlier daemon: the tag is the content digest) is not pushed again."""
        if tag in self._published:
            return self._published[tag]
        registry = self.settings.registry
        if not registry:
            raise ImageUnavailable(f"{tag}: no swarm registry to push it to (SERVICE_SWARM_REGISTRY, or SERVICE_SWARM_IMAGES "
                                   "naming the registry's stock images)")
        lock = self._publishing.setdefault(tag, asyncio.Lock())
        async with lock:
            if tag not in self._published:
                self._published[tag] = await self._call(self._publish, tag, registry, critical=True)
        return self._published[tag]

    def _publish(self, tag: str, registry: str, local: Any = None) -> str:
        """Blocking: (load into the manager, tag, push) unless the registry has the tag; the ref by digest."""
        name, _, version = tag[len("localhost/"):].rpartition(":")
        repo = f"{registry}/{name}"
        try:
            digest = self.api.inspect_distribution(f"{repo}:{version}")["Descriptor"]["digest"]
            log.info("built image %s is in the swarm's registry already (%s)", tag, digest[:19])
            return f"{repo}@{digest}"
        except Exception:
            pass
        started = time.monotonic()
        own = local or self.build_api()
        try:
            self.api.load_image(own.get_image(tag), quiet=True)
        except Exception as exc:
            raise ImageUnavailable(f"{tag}: cannot copy it from svcd's engine to the swarm's manager: "
                                   f"{str(exc).splitlines()[0][:200]}") from exc
        self.api.tag(tag, repo, version)
        digest = ""
        for line in self.api.push(repo, tag=version, stream=True, decode=True):
            if line.get("error"):
                raise ImageUnavailable(f"{tag}: the swarm's registry refused it: {str(line['error'])[:200]}")
            digest = (line.get("aux") or {}).get("Digest") or digest
        if not digest:
            digest = self.api.inspect_distribution(f"{repo}:{version}")["Descriptor"]["digest"]
        log.info("built image %s pushed to the swarm's registry as %s@%s in %.1fs", tag, repo, digest[:19],
                 time.monotonic() - started)
        return f"{repo}@{digest}"

    def build_api(self) -> Any:
        """An API client of svcd's own engine, where images are built (an installed agent's layer,
        agents/installed/layer.py) before `publish` pushes them to the swarm's registry."""
        with self._build_lock:
            if self._build_api is None:
                import docker

                self._build_api = docker.APIClient(base_url=self.settings.local_engine, version="auto", timeout=600)
            return self._build_api

    # --- networks ----------------------------------------------------------------------------

    async def create_network(self, name: str, labels: dict[str, str], internal: bool = True,
                             subnet: str | None = None, gateway: str | None = None) -> str:
        def create() -> dict:
            ipam = None
            if subnet is not None:
                from docker.types import IPAMConfig, IPAMPool

                ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=subnet, gateway=gateway)])
            return self.api.create_network(name, driver="overlay", internal=internal, attachable=True, labels=labels,
                                           check_duplicate=True, ipam=ipam)

        return (await self._call(create, critical=True))["Id"]

    async def remove_network(self, name_or_id: str) -> None:
        await self._call(self._remove_network, name_or_id)

    async def list_volumes(self, labels: dict[str, str]) -> list[dict[str, Any]]:
        """None: a service's volumes live on its node and go with its task (the nodes' engines are not
        swept from here)."""
        return []

    async def remove_volume(self, name: str) -> None:
        return None

    def _remove_network(self, name_or_id: str) -> None:
        """Retried while the tasks of removed services still detach from it (seconds on a swarm)."""
        import docker.errors

        deadline = time.monotonic() + NETWORK_DETACH_S
        while True:
            try:
                self.api.remove_network(name_or_id)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                if "active endpoints" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    async def network_bridge(self, name_or_id: str) -> str:
        raise RuntimeUnavailable("a swarm overlay has no bridge on this host: sandboxes on a swarm are isolated by "
                                 "internal overlays on the nodes, not by this host's firewall")

    async def network_endpoints(self, name_or_id: str) -> int:
        raise RuntimeUnavailable("a swarm's overlays are not pooled (daemon/sandbox/network_pool.py)")

    # --- containers (services) ---------------------------------------------------------------

    async def run_container(self, spec: ContainerSpec, inspect: bool = False,
                            secrets: dict[str, bytes] | None = None) -> ContainerInfo:
        """Start `spec` as a service; `secrets` become Swarm secrets (files /run/secrets/<name>, never
        environment) that live exactly as long as the container."""
        unsupported = [what for what, used in (("published ports", spec.ports),
                                               ("fixed addresses", spec.ipv4_address)) if used]
        if unsupported:
            raise SwarmTaskFailed(f"container {spec.name}: the swarm driver has no {', '.join(unsupported)} "
                                  "(nodes share no host ports or addresses with svcd)")
        if len(secrets or {}) > MAX_SECRETS:
            raise SwarmTaskFailed(f"container {spec.name}: {len(secrets or {})} secrets, at most {MAX_SECRETS}")
        spec = _without_sockets(spec)
        image = self.resolve(spec.image)
        node = None if PLACE_LABEL in spec.labels else await self._place(spec)
        try:
            refs = [await self._call(self._create_secret, spec, key, value, critical=True)
                    for key, value in (secrets or {}).items()]
            service_id = (await self._call(self._create_service, spec, image, refs, node.id if node else None,
                                           critical=True))["ID"]
        except BaseException:
            await self._call(self._remove_service, spec.name)
            raise
        self.placement.alias(service_id, spec.name)
        try:
            info = await self._wait_running(service_id, spec.name)
            if spec.labels.get("svc.sandbox"):
                self._sandbox_of[info.id] = spec.labels["svc.sandbox"]
            if spec.binds:
                # A helper's (service, proxy) writable bind is its output, read by the daemon; the agent's is the
                # workspace, except the paths it names as its outputs (the trace drop).
                helper = spec.labels.get("svc.role", "agent") != "agent"
                self._mirrors[info.id] = [Mirror(Path(host), path, mode == "rw",
                                                 collect=mode == "rw" and (helper or path in spec.outputs))
                                          for host, (path, mode) in spec.binds.items()]
                self._mirror_locks[info.id] = asyncio.Lock()
                await self._push_first(info.id)
            return info
        except BaseException:
            await self._call(self._remove_service, service_id)
            raise

    async def _read_nodes(self) -> list[dict[str, Any]]:
        return await self._call(self._read_nodes_now)

    def _read_nodes_now(self) -> list[dict[str, Any]]:
        """The manager's nodes, handed to the placement with every task's reservation; blocking."""
        nodes = self.api.nodes()
        self.placement.update(nodes, self.api.tasks())
        return nodes

    async def _place(self, spec: ContainerSpec) -> NodeShare | None:
        """The node for `spec` with its reservation held (placement.py). While no node has room (this
        daemon's other sandboxes hold it) it waits, up to the start timeout, rather than have Swarm
        fail the task after the place timeout; then it is placed anyway and Swarm says why it cannot run."""
        agent = spec.labels.get("svc.role", "agent") == "agent"
        cpus, memory = int(spec.nano_cpus or 0) if agent else 0, int(spec.mem_limit or 0)
        reachable = set(self.settings.nodes)
        deadline = time.monotonic() + self._start_timeout_s
        read_at = 0.0  # the first time there is no room, read at once: removed containers' tasks may be gone
        while True:
            if self.placement.stale():
                await self._read_nodes()
            force = time.monotonic() > deadline or not self.placement.fits_anywhere(cpus, memory, reachable)
            node, held = self.placement.reserve(spec.name, spec.labels.get("svc.sandbox"), cpus, memory, reachable, force)
            if held:
                return node
            if time.monotonic() - read_at > PLACE_REREAD_S:  # what others hold may have gone: read again
                await self._read_nodes()
                read_at = time.monotonic()
                continue
            await asyncio.sleep(PLACE_WAIT_S)

    async def _push_first(self, container: str) -> None:
        """Every mirrored bind into a container that has just started, and then the marker its command
        waits for (MIRROR_WAIT), in one archive: one engine call, however many binds."""
        mirrors = self._mirrors.get(container, [])
        signatures = [await asyncio.to_thread(signature, m.host) for m in mirrors]
        data = await asyncio.to_thread(pack_all, [(m.host, m.target) for m in mirrors], MIRRORED_MARKER)
        await self.put_archive(container, "/", data)
        for mirror, current in zip(mirrors, signatures):
            mirror.signature = current

    async def _push(self, container: str) -> None:
        """Copy the host side of each mirrored bind into the container when it changed there (a
        helper's output is never pushed again)."""
        for mirror in self._mirrors.get(container, []):
            if mirror.collect:
                continue
            current = await asyncio.to_thread(signature, mirror.host)
            if current != mirror.signature:
                data = await asyncio.to_thread(pack, mirror.host, mirror.target)
                await self.put_archive(container, "/", data)
                mirror.signature = current

    async def _pull(self, container: str, outputs_only: bool = False, cap: int = ARCHIVE_CAP_BYTES) -> None:
        """Copy each writable mirrored path back from the container over its host side (with
        `outputs_only`, only the append-only outputs: `collect`)."""
        for mirror in self._mirrors.get(container, []):
            if mirror.collect:
                data = await self.get_archive(container, mirror.target, cap)
                await asyncio.to_thread(collect_from, data, mirror.host)
            elif mirror.writable and not outputs_only:
                data = await self.get_archive(container, mirror.target)
                await asyncio.to_thread(replace_from, data, mirror.host)
                mirror.signature = await asyncio.to_thread(signature, mirror.host)

    async def collect(self, container: str, cap: int = ARCHIVE_CAP_BYTES) -> None:
        """Bring back now what a container wrote to its output directories while it still runs (the
        model gateway's records, the agent's trace drop); a no-op for a container with none. An
        output directory over `cap` bytes as an archive raises ValueError (it comes back at the
        command's end instead)."""
        lock = self._mirror_locks.get(container)
        if lock is None or not any(m.collect for m in self._mirrors.get(container, [])):
            return
        async with lock:
            await self._pull(container, outputs_only=True, cap=cap)

    def _create_secret(self, spec: ContainerSpec, key: str, value: bytes):
        from docker.types import SecretReference

        name = f"{spec.name}-{key}"
        labels = {**spec.labels, SECRET_OF_LABEL: spec.name}
        created = self.api.create_secret(name, value, labels=labels)
        return SecretReference(created["ID"], name, filename=key, mode=0o444)

    def _create_service(self, spec: ContainerSpec, image: str, secrets: list, node_id: str | None = None) -> dict:
        from docker.types import (ContainerSpec as TaskContainer, DNSConfig, EndpointSpec, Mount, Placement, Resources,
                                  RestartPolicy, TaskTemplate)

        command, args = spec.entrypoint, spec.command
        if spec.binds:  # the command waits for the mirrors (their runner is the image's `sh`; see MIRROR_WAIT)
            command, args = ["sh", "-c", MIRROR_WAIT, "svc-mirror-wait", *(spec.entrypoint or []), *(spec.command or [])], None
        container = TaskContainer(
            image, command=command, args=args, hostname=spec.hostname, env=spec.env or None,
            workdir=spec.working_dir, user=spec.user, labels=spec.labels,
            mounts=[Mount(target=path, source=None, type="tmpfs") for path in spec.tmpfs] or None,
            hosts=spec.extra_hosts or None, dns_config=DNSConfig(options=spec.dns_opt) if spec.dns_opt else None,
            init=spec.init or None, secrets=secrets or None,
        )
        # The agent reserves as much as it is limited to: Swarm places it only where its share is free, and
        # the scheduler runs as many sandboxes as agent shares fit (`concurrency`). Helpers (proxies,
        # services) reserve their memory but no CPU, else a proxied sandbox would hold three CPUs.
        helper = spec.labels.get("svc.role", "agent") != "agent"
        resources = Resources(cpu_limit=spec.nano_cpus, mem_limit=spec.mem_limit,
                              cpu_reservation=None if helper else spec.nano_cpus, mem_reservation=spec.mem_limit)
        if spec.pids_limit:
            resources.setdefault("Limits", {})["Pids"] = spec.pids_limit
        place = spec.labels.get(PLACE_LABEL)
        constraints = (Placement(constraints=[f"node.labels.svc.node=={place}"]) if place
                       else Placement(constraints=[f"node.id=={node_id}"]) if node_id else None)
        networks = [{"Target": spec.network, "Aliases": spec.aliases}] if spec.network else []
        networks += [{"Target": net, "Aliases": aliases} for net, aliases in spec.extra_networks.items()]
        template = TaskTemplate(
            container, resources=resources, restart_policy=RestartPolicy(condition="none"),
            placement=constraints, networks=networks,
        )
        return self.api.create_service(template, name=spec.name, labels=spec.labels, endpoint_spec=EndpointSpec(mode="dnsrr"))

    async def _wait_running(self, service_id: str, name: str) -> ContainerInfo:
        started = time.monotonic()
        while True:
            tasks = await self._call(lambda: self.api.tasks(filters={"service": service_id}))
            task = tasks[0] if tasks else None
            state = (task or {}).get("Status", {}).get("State", "new")
            waited = time.monotonic() - started
            if state == "running":
                assert task is not None
                return await self._placed_info(service_id, name, task)
            if state in ENDED:
                assert task is not None
                node = await self._node_name(task.get("NodeID"))
                cause = task["Status"].get("Err") or task["Status"].get("Message") or state
                raise SwarmTaskFailed(f"container {name} on node {node or '(none)'}: {state}: {cause}")
            if state == "pending" and waited > self._place_timeout_s:
                cause = (task or {}).get("Status", {}).get("Err") or "no node has the resources or matches the placement"
                raise SwarmTaskFailed(f"container {name}: no node can run it after {waited:.0f}s: {cause}")
            if waited > self._start_timeout_s:
                node = await self._node_name((task or {}).get("NodeID"))
                raise SwarmTaskFailed(f"container {name} on node {node or '(none)'}: still {state} after {waited:.0f}s")
            await asyncio.sleep(0.1)

    async def _placed_info(self, service_id: str, name: str, task: dict) -> ContainerInfo:
        node = await self._node_name(task.get("NodeID"))
        container_id = task["Status"]["ContainerStatus"]["ContainerID"]
        self._placed[container_id] = (node or "", service_id)
        ip = None
        for attachment in task.get("NetworksAttachments") or []:
            addresses = attachment.get("Addresses") or []
            if addresses and not (attachment.get("Network") or {}).get("Spec", {}).get("Ingress"):
                ip = addresses[0].split("/")[0]
                break
        return ContainerInfo(id=container_id, name=name, ip=ip)

    async def _node_name(self, node_id: str | None) -> str | None:
        if not node_id:
            return None
        if node_id not in self._node_names:
            data = await self._call(lambda: self.api.inspect_node(node_id))
            self._node_names[node_id] = data["Description"]["Hostname"]
        return self._node_names[node_id]

    def node_of(self, container_id: str) -> str | None:
        """The hostname of the node running a container this driver started."""
        placed = self._placed.get(container_id)
        return placed[0] if placed else None

    async def remove_container(self, id_or_name: str) -> None:
        placed = self._placed.pop(id_or_name, None)
        for container, (_, service) in list(self._placed.items()):
            if service == id_or_name:  # removed by service id (reaping, teardown by label)
                self._placed.pop(container)
                self._mirrors.pop(container, None)
                self._mirror_locks.pop(container, None)
                self._sandbox_of.pop(container, None)
        self._mirrors.pop(id_or_name, None)
        self._mirror_locks.pop(id_or_name, None)
        self._sandbox_of.pop(id_or_name, None)
        await self._call(self._remove_service, placed[1] if placed else id_or_name)

    def _remove_service(self, service: str) -> None:
        """The service and its secrets (a secret is removable once no task uses it)."""
        import docker.errors

        name = service
        self.placement.release(service)
        try:
            found = self.api.inspect_service(service)
            name = found["Spec"]["Name"]
            self.placement.release(found["ID"])
            self.api.remove_service(service)
        except docker.errors.NotFound:
            try:  # an orphaned secret listed by list_labelled
                self.api.remove_secret(service)
                return
            except docker.errors.NotFound:
                pass
        for secret in self.api.secrets(filters={"label": f"{SECRET_OF_LABEL}={name}"}):
            for attempt in range(50):
                try:
                    self.api.remove_secret(secret["ID"])
                    break
                except docker.errors.NotFound:
                    break
                except docker.errors.APIError as exc:
                    if "in use" not in str(exc) or attempt == 49:
                        raise
                    time.sleep(0.1)

    async def container_state(self, id_or_name: str) -> dict[str, Any] | None:
        """The container's state from its node; when the node is gone, a stopped state naming it."""
        try:
            node, engine = await self._engine_of(id_or_name)
        except NodeLost as exc:
            if id_or_name not in self._placed:
                return None
            return {"Status": "lost", "Running": False, "ExitCode": None, "Error": str(exc)}
        return await engine.container_state(id_or_name)

    async def logs(self, id_or_name: str, tail: int = 40) -> str:
        try:
            _, engine = await self._engine_of(id_or_name)
        except NodeLost as exc:
            return f"(logs unavailable: {exc})"
        return await engine.logs(id_or_name, tail=tail)

    async def output(self, id_or_name: str, stream: str, keep_bytes: int) -> bytes:
        """From the engine of the node the container runs on (the manager's engine has no logs of it)."""
        _, engine = await self._engine_of(id_or_name)
        return await engine.output(id_or_name, stream, keep_bytes)

    # --- exec and files (on the task's node) -------------------------------------------------

    async def exec(self, container: str, argv: list[str], *, env: dict[str, str] | None = None, workdir: str | None = None,
                   user: str | None = None, detach: bool = False, watchdog_s: float | None = None,
                   output_cap: int = OUTPUT_CAP_BYTES) -> RawExec:
        _, engine = await self._engine_of(container)
        lock = self._mirror_locks.get(container)
        if lock is None:
            raw = await engine.exec(container, argv, env=env, workdir=workdir, user=user, detach=detach,
                                    watchdog_s=watchdog_s, output_cap=output_cap)
            if not detach:
                await self._collect_siblings(container)
            return raw
        # The host copy is what the daemon reads (files, state, diff, scoring): in step around each command.
        async with lock:
            await self._push(container)
        raw = await engine.exec(container, argv, env=env, workdir=workdir, user=user, detach=detach,
                                watchdog_s=watchdog_s, output_cap=output_cap)
        if not detach:
            async with lock:
                await self._pull(container)
            await self._collect_siblings(container)
        return raw

    async def _collect_siblings(self, container: str) -> None:
        """What the sandbox's helpers wrote while a command ran (the proxies' audit lines, http_mock's
        recorded requests) back on the host, where the daemon reads it, before the command returns."""
        sandbox = self._sandbox_of.get(container)
        if sandbox is None:
            return
        for other, owner in list(self._sandbox_of.items()):
            if owner != sandbox or other == container or not any(m.collect for m in self._mirrors.get(other, [])):
                continue
            lock = self._mirror_locks.get(other)
            if lock is None:
                continue
            try:
                async with lock:
                    await self._pull(other)
            except Exception as exc:  # a helper that is gone or stopped: the command's own result stands
                log.warning("collecting the output of %s failed: %s", other[:12], exc)

    async def put_file(self, container: str, path: str, data: bytes, mode: int = 0o644) -> None:
        _, engine = await self._engine_of(container)
        await engine.put_file(container, path, data, mode)

    async def put_archive(self, container: str, directory: str, data: bytes) -> None:
        """Unpack a tar stream into `directory` in the container (the workspace has no shared filesystem)."""
        if len(data) > ARCHIVE_CAP_BYTES:
            raise ValueError(f"archive of {len(data)} bytes is over the limit of {ARCHIVE_CAP_BYTES} bytes")
        _, engine = await self._engine_of(container)
        await engine._call(lambda: engine.api.put_archive(container, directory, data))

    async def get_archive(self, container: str, path: str, cap: int = ARCHIVE_CAP_BYTES) -> bytes:
        """`path` in the container as a tar stream (at most `cap` bytes)."""
        _, engine = await self._engine_of(container)

        def read() -> bytes:
            stream, _ = engine.api.get_archive(container, path)
            buf = bytearray()
            for chunk in stream:
                buf += chunk
                if len(buf) > cap:
                    raise ValueError(f"{path} is over the limit of {cap} bytes as an archive")
            return bytes(buf)

        return await engine._call(read)

    async def read_file(self, container: str, path: str) -> bytes:
        data = await self.get_archive(container, path)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.next()
            handle = tar.extractfile(member) if member is not None else None
            if handle is None:
                raise IsADirectoryError(path)
            return handle.read()

    async def oom_kill_count(self, container_id: str) -> int | None:
        _, engine = await self._engine_of(container_id)
        return await engine.oom_kill_count(container_id)

    async def published_ports(self, container_id: str) -> dict[int, tuple[str, int]]:
        return {}

    def room_for(self, nano_cpus: int, memory: int) -> bool:
        """Whether a node has room for one more sandbox reserving this much, as the placement last
        read the nodes (the warm pool fills only then: placement.py)."""
        return self.placement.room_for(nano_cpus, memory, set(self.settings.nodes))

    async def process_count(self, container_id: str) -> int | None:
        """How many processes the container has, as its node's engine lists them (`top`: the node reads
        the container's cgroup, which nothing in the container can hide from); None when it cannot say."""
        try:
            _, engine = await self._engine_of(container_id)
            listing = await engine._call(lambda: engine.api.top(container_id))
        except Exception as exc:  # noqa: BLE001 - unknown: the reaper runs
            log.debug("cannot count the processes of %s: %s", container_id[:12], exc)
            return None
        processes = listing.get("Processes") if isinstance(listing, dict) else None
        return len(processes) if isinstance(processes, list) else None

    def listening_ports(self, pid: int) -> set[int] | None:
        return None  # the container's processes are on another host

    # --- capacity and reaping ----------------------------------------------------------------

    def _capacity_now(self) -> dict[str, int]:
        """Ready, active nodes and the sum of what they offer (nano CPUs, memory bytes); blocking."""
        out = {"nodes": 0, "nano_cpus": 0, "memory": 0}
        nodes = self._read_nodes_now()  # every CAPACITY_REFRESH_S: the pool's `room_for` reads the placement
        for node in nodes:
            if node["Status"].get("State") == "ready" and node["Spec"].get("Availability") == "active":
                res = node["Description"].get("Resources") or {}
                out["nodes"] += 1
                out["nano_cpus"] += int(res.get("NanoCPUs") or 0)
                out["memory"] += int(res.get("MemoryBytes") or 0)
        return out

    async def capacity(self) -> dict[str, int]:
        return await self._call(self._capacity_now)

    def concurrency(self, local_limit: int, cap: int) -> int:
        """How many sandboxes run at once: as many agent reservations (DEFAULT_CPUS, DEFAULT_MEMORY; helpers
        reserve no CPU, see `_create_service`) as the ready nodes hold now, at most `cap`, at least 1;
        `local_limit` when the manager does not answer. `follow_capacity` keeps the scheduler in step."""
        try:
            _probe("manager", self._manager)
            cap_now = self._capacity_now()
        except Exception as exc:
            log.warning("swarm capacity unknown (%s): the scheduler runs %d sandboxes at once", exc, local_limit)
            return local_limit
        fits = min(cap_now["nano_cpus"] // int(DEFAULT_CPUS * 1e9), cap_now["memory"] // DEFAULT_MEMORY)
        return max(1, min(fits, cap))

    def follow_capacity(self, current: int, cap: int, apply: Callable[[int], None]) -> None:
        """Read the capacity again every `capacity_refresh_s` and hand a changed limit to `apply` (the
        scheduler's), so a node that joins or dies changes how many sandboxes run without a restart.
        While the manager does not answer the last limit stands."""
        async def follow() -> None:
            limit = current
            while True:
                await asyncio.sleep(self._capacity_refresh_s)
                now = await asyncio.to_thread(self.concurrency, limit, cap)
                if now != limit:
                    log.info("swarm capacity changed: the scheduler runs %d sandboxes at once (was %d)", now, limit)
                    limit = now
                    apply(now)

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            log.warning("no event loop: the swarm's capacity is read once (%d sandboxes at once)", current)
            return
        if self._capacity_task is not None:
            self._capacity_task.cancel()
        self._capacity_task = loop.create_task(follow(), name="svc-swarm-capacity")

    async def nodes(self) -> list[dict[str, Any]]:
        """Every node as the manager sees it now (`reachable`: the daemon has its engine's URL)."""
        await self._read_nodes()
        return [{"name": n.name, "role": n.role, "state": n.state, "availability": n.availability,
                 "message": n.message or None, "nano_cpus": n.nano_cpus, "memory_bytes": n.memory,
                 "reachable": n.name in self.settings.nodes}
                for n in self.placement.shares()]

    async def nodes_down(self) -> dict[str, str]:
        """Nodes the manager sees as not ready -> their state and message."""
        nodes = await self._call(lambda: self.api.nodes())
        return {n["Description"]["Hostname"]: f"{n['Status'].get('State')}: {n['Status'].get('Message') or ''}".strip()
                for n in nodes if n["Status"].get("State") != "ready"}

    async def sandbox_remains(self, sandbox_id: str, daemon_id: str) -> tuple[list[str], list[str]]:
        """The sandbox's services (and orphaned secrets) on the swarm, listed by label; no volumes."""
        self.placement.forget(sandbox_id)
        services, _ = await self.list_labelled({"svc.sandbox": sandbox_id, "svc.daemon": daemon_id})
        return [s["Id"] for s in services], []

    async def list_labelled(self, labels: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Services (as containers: removing one removes its task on whichever node, and its secrets),
        secrets whose service is gone, and overlays."""
        filters = {"label": [f"{k}={v}" if v is not None else k for k, v in labels.items()]}

        def listing():
            services = [{"Id": s["ID"], "Name": s["Spec"]["Name"]} for s in self.api.services(filters=filters)]
            names = {s["Name"] for s in services}
            orphans = [{"Id": x["ID"], "Name": x["Spec"]["Name"]} for x in self.api.secrets(filters=filters)
                       if (x["Spec"].get("Labels") or {}).get(SECRET_OF_LABEL) not in names]
            networks = [n for n in self.api.networks(filters=filters) if n.get("Driver") == "overlay"]
            return services + orphans, networks

        return await self._call(listing)


def _without_sockets(spec: ContainerSpec) -> ContainerSpec:
    """`spec` without binds of Unix sockets (the daemon's sandbox socket, for in-agent traces): a socket
    cannot be copied to another node, so the agent there has none, and no environment naming it."""
    sockets = {host: target for host, (target, _) in spec.binds.items() if _is_socket(host)}
    if not sockets:
        return spec
    log.info("container %s: %s not reachable on a swarm node (in-agent traces are not sent from there)",
             spec.name, ", ".join(sockets.values()))
    gone = {f"unix://{target}" for target in sockets.values()}
    return dataclasses.replace(spec, binds={h: b for h, b in spec.binds.items() if h not in sockets},
                               env={k: v for k, v in (spec.env or {}).items() if v not in gone})


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def _probe(node: str, engine: RemoteEngine) -> None:
    """Fail in seconds when a node's engine does not accept connections (the API client would wait
    minutes); an ssh:// engine's tunnel is started again when it died, or names why it cannot be."""
    parsed = urlparse(engine._base_url)
    if parsed.scheme == "ssh":
        try:
            engine.reach()
        except RuntimeUnavailable as exc:
            raise NodeLost(f"node {node}: {exc}") from None
        return
    if parsed.scheme not in ("tcp", "http", "https") or not parsed.hostname:
        return  # unix:// is checked by the call itself
    try:
        socket.create_connection((parsed.hostname, parsed.port or 2376), timeout=NODE_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise NodeLost(f"node {node} ({parsed.hostname}) does not answer: {exc.strerror or exc}") from exc
