"""`SandboxDriver` on the local Docker engine.

The docker SDK is synchronous. Every call goes through `DockerDriver._call`, which runs it on the
driver's own bounded thread pool (never on the event loop). Calls that create something (a
network, a container) are *critical*: when the awaiting task is cancelled (DELETE during boot),
the call is still awaited to completion before the cancellation propagates, so whatever it created
is known and cleaned up by label afterwards instead of appearing after the cleanup ran.

Everything the driver creates carries the labels it is given; the manager always passes
`svc.sandbox`, `svc.tenant` and `svc.daemon` so a restarted daemon can find and reap orphans.
"""
from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from daemon.sandbox.engine import layer_diff
from daemon.sandbox.engine import (
    CONTAINER_LOG_BYTES,
    OUTPUT_CAP_BYTES,
    ContainerInfo,
    ContainerSpec,
    ImageUnavailable,
    RawExec,
    RuntimeUnavailable,
)

if TYPE_CHECKING:
    import docker

log = logging.getLogger("svcd.sandbox.engine.docker")
T = TypeVar("T")
LOCAL_NODE = "local"  # the node name of the daemon's own engine (GET /v1/nodes, a sandbox's `node`)
IMAGE_SEEN_S = 10.0  # how long the engine's "I have this image" is believed without asking again


class DockerDriver:
    """`SandboxDriver` on the local Docker engine (docker SDK, low-level API client)."""

    runtime = "docker"

    def __init__(self, max_workers: int = 48, base_url: str | None = None):
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="svc-docker")
        self._max_workers = max_workers
        self._base_url = base_url
        self._api: docker.APIClient | None = None  # short-timeout client for control calls
        self._exec_api: docker.APIClient | None = None  # no read timeout: exec output streams for as long as the command runs
        self._lock = threading.Lock()
        # container id -> its overlay2 (upper, lowers) on this host, or None (another driver, remote)
        self._layers: dict[str, tuple[str, list[str]] | None] = {}
        self._volumes: dict[str, list[str]] = {}  # image reference -> the paths its VOLUME lines declare
        # image reference -> when the engine last said it has it (IMAGE_SEEN_S: not asked on every boot)
        self._images_seen: dict[str, float] = {}
        # sandbox id (its `svc.sandbox` label) -> the containers and volumes made for it here, so that
        # its teardown removes them without listing the engine (a restart reaps by label instead)
        self._made: dict[str, tuple[set[str], set[str]]] = {}

    # --- plumbing ----------------------------------------------------------------------------

    def _clients(self):
        with self._lock:
            if self._api is None:
                import docker

                kwargs: dict[str, Any] = {"max_pool_size": self._max_workers + 4}
                try:
                    if self._base_url:
                        api = docker.APIClient(base_url=self._base_url, version="auto", timeout=120, **kwargs)
                        exec_api = docker.APIClient(base_url=self._base_url, version=api.api_version, timeout=None, **kwargs)
                    else:
                        api = docker.from_env(timeout=120, **kwargs).api
                        exec_api = docker.from_env(timeout=None, version=api.api_version, **kwargs).api
                    api.ping()
                except Exception as exc:
                    raise RuntimeUnavailable(f"cannot reach the Docker engine: {exc}") from exc
                self._api, self._exec_api = api, exec_api
            return self._api, self._exec_api

    @property
    def api(self):
        return self._clients()[0]

    async def nodes(self) -> list[dict[str, Any]]:
        """This machine, the one node of the local engine."""
        import psutil

        return [{"name": LOCAL_NODE, "role": "local", "state": "ready", "availability": "active", "message": None,
                 "nano_cpus": (os.cpu_count() or 1) * 10**9, "memory_bytes": psutil.virtual_memory().total,
                 "reachable": True}]

    def node_of(self, container_id: str) -> str | None:
        """The node a container runs on: this machine's engine (LOCAL_NODE) for every container."""
        return LOCAL_NODE

    def concurrency(self, local_limit: int, cap: int) -> int:
        """How many sandboxes the scheduler runs at once: this machine's limit (runner/engine.py)."""
        return local_limit

    async def _call(self, fn: Callable[..., T], *args: object, critical: bool = False, **kwargs: object) -> T:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, lambda: fn(*args, **kwargs))
        if not critical:
            return await future
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            try:
                await future
            except BaseException:
                pass
            raise

    async def close(self) -> None:
        def shut() -> None:
            for client in (self._api, self._exec_api):
                if client is not None:
                    try:
                        client.close()
                    except Exception:
                        pass

        await asyncio.get_running_loop().run_in_executor(self._pool, shut)
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def ping(self) -> None:
        await self._call(self._clients)

    # --- images ------------------------------------------------------------------------------

    async def ensure_image(self, ref: str) -> None:
        await self._call(self._ensure_image, ref)

    async def has_image(self, ref: str) -> bool:
        """Whether the engine has `ref` (an inspect, never a pull; a yes is remembered IMAGE_SEEN_S)."""
        return await self._call(self._has_image, ref)

    def _has_image(self, ref: str) -> bool:
        import docker.errors

        seen = self._images_seen.get(ref)
        if seen is not None and time.monotonic() - seen < IMAGE_SEEN_S:
            return True
        try:
            self.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            return False
        except docker.errors.APIError as exc:
            if exc.status_code != 404:
                raise
            return False
        self._images_seen[ref] = time.monotonic()
        return True

    def _ensure_image(self, ref: str) -> None:
        if self._has_image(ref):
            return
        repo, tag = _split_ref(ref)
        try:
            self.api.pull(repo, tag=tag)
            self.api.inspect_image(ref)
        except Exception as exc:
            raise ImageUnavailable(str(exc).splitlines()[0][:300]) from exc
        self._images_seen[ref] = time.monotonic()

    # --- networks ----------------------------------------------------------------------------

    async def create_network(self, name: str, labels: dict[str, str], internal: bool = True,
                             subnet: str | None = None, gateway: str | None = None) -> str:
        def create() -> dict:
            ipam = None
            if subnet is not None:
                from docker.types import IPAMConfig, IPAMPool

                ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=subnet, gateway=gateway)])
            return self.api.create_network(name, driver="bridge", internal=internal, labels=labels, check_duplicate=True, ipam=ipam)

        result = await self._call(create, critical=True)
        return result["Id"]

    async def remove_network(self, name_or_id: str) -> None:
        await self._call(self._remove_network, name_or_id)

    async def network_bridge(self, name_or_id: str) -> str:
        """The host interface of a bridge network (`br-<id[:12]>` unless it was named at creation)."""
        def read() -> str:
            data = self.api.inspect_network(name_or_id)
            return (data.get("Options") or {}).get("com.docker.network.bridge.name") or f"br-{data['Id'][:12]}"

        return await self._call(read)

    async def network_endpoints(self, name_or_id: str) -> int:
        """How many containers are attached to the network (the pool reuses it only at 0)."""
        def read() -> int:
            return len(self.api.inspect_network(name_or_id).get("Containers") or {})

        return await self._call(read)

    def _remove_network(self, name_or_id: str) -> None:
        import docker.errors

        for attempt in range(20):
            try:
                self.api.remove_network(name_or_id)
                return
            except docker.errors.NotFound:
                return
            except docker.errors.APIError as exc:
                # "has active endpoints": a container removal has not finished detaching yet.
                if "active endpoints" in str(exc) and attempt < 19:
                    time.sleep(0.1)
                    continue
                raise

    # --- containers --------------------------------------------------------------------------

    async def run_container(self, spec: ContainerSpec, inspect: bool = False) -> ContainerInfo:
        return await self._call(self._run_container, spec, inspect, critical=True)

    def _run_container(self, spec: ContainerSpec, inspect: bool) -> ContainerInfo:
        import docker.errors

        api = self.api
        made = self._made_for(spec.labels.get("svc.sandbox"))
        binds: dict[str, dict[str, str]] = {host: {"bind": path, "mode": mode} for host, (path, mode) in spec.binds.items()}
        for index, path in enumerate(self._declared_volumes(spec)):
            # a labelled named volume where the engine would create an anonymous one (reaping finds it)
            name = f"{spec.name}-vol{index}"
            made[1].add(name)  # before the engine has it: a failed create leaves nothing unlisted
            api.create_volume(name=name, labels=spec.labels)
            binds[name] = {"bind": path, "mode": "rw"}
        host_config = api.create_host_config(
            binds=binds or None,
            network_mode=spec.network,
            init=spec.init or None,
            nano_cpus=spec.nano_cpus,
            mem_limit=spec.mem_limit,
            memswap_limit=spec.mem_limit,  # no swap: a memory-hungry process is killed, not slowed
            pids_limit=spec.pids_limit,
            extra_hosts=spec.extra_hosts or None,
            tmpfs=spec.tmpfs or None,
            dns_opt=spec.dns_opt or None,
            port_bindings={port: (ip, host_port) if host_port else (ip,) for port, (ip, host_port) in spec.ports.items()} or None,
            auto_remove=False,
            # what a container prints lands on the host: at most CONTAINER_LOG_BYTES of it is kept
            log_config={"type": "json-file", "config": {"max-size": str(CONTAINER_LOG_BYTES), "max-file": "1"}},
        )
        networking = None
        if spec.network:
            networking = api.create_networking_config(
                {spec.network: api.create_endpoint_config(aliases=spec.aliases or None, ipv4_address=spec.ipv4_address)}
            )
        try:
            created = api.create_container(
                spec.image,
                command=spec.command,
                entrypoint=spec.entrypoint,
                environment=spec.env,
                labels=spec.labels,
                working_dir=spec.working_dir,
                user=spec.user,
                hostname=spec.hostname,
                name=spec.name,
                host_config=host_config,
                networking_config=networking,
                ports=list(spec.ports) or None,
                detach=True,
            )
        except docker.errors.ImageNotFound:
            self._images_seen.pop(spec.image, None)  # removed since it was seen: the next boot asks again
            raise
        container_id = created["Id"]
        made[0].add(container_id)
        for network, aliases in spec.extra_networks.items():
            api.connect_container_to_network(container_id, network, aliases=aliases or None)
        api.start(container_id)
        info = ContainerInfo(id=container_id, name=spec.name)
        if inspect:
            data = api.inspect_container(container_id)
            info.pid = data["State"].get("Pid") or None
            nets = (data.get("NetworkSettings") or {}).get("Networks") or {}
            for net in nets.values():
                if net.get("IPAddress"):
                    info.ip = net["IPAddress"]
                    break
        return info

    def _declared_volumes(self, spec: ContainerSpec) -> list[str]:
        """The image's VOLUME paths that neither a bind nor a tmpfs of `spec` covers (asked of the
        engine once per image reference: not on every boot's path)."""
        declared = self._volumes.get(spec.image)
        if declared is None:
            config = self.api.inspect_image(spec.image).get("Config") or {}
            declared = self._volumes[spec.image] = sorted((config.get("Volumes") or {}).keys())
        covered = {path for path, _ in spec.binds.values()} | set(spec.tmpfs)
        return [path for path in declared if path not in covered]

    async def list_volumes(self, labels: dict[str, str]) -> list[dict[str, Any]]:
        filters = {"label": [f"{k}={v}" if v is not None else k for k, v in labels.items()]}
        return await self._call(lambda: list(self.api.volumes(filters=filters).get("Volumes") or []))

    async def remove_volume(self, name: str) -> None:
        import docker.errors

        def remove() -> None:
            try:
                self.api.remove_volume(name, force=True)
            except docker.errors.NotFound:
                pass

        await self._call(remove)

    async def remove_container(self, id_or_name: str) -> None:
        self._layers.pop(id_or_name, None)
        await self._call(self._remove_container, id_or_name)

    def _made_for(self, sandbox_id: str | None) -> tuple[set[str], set[str]]:
        if sandbox_id is None:
            return set(), set()
        with self._lock:
            return self._made.setdefault(sandbox_id, (set(), set()))

    async def sandbox_remains(self, sandbox_id: str, daemon_id: str) -> tuple[list[str], list[str]]:
        """The containers and volumes made for the sandbox that may still exist (its teardown removes
        them), from what this driver made: every one of them carries the sandbox's label, so what a
        crash leaves is reaped by label at the next start and by the sweep."""
        with self._lock:
            containers, volumes = self._made.pop(sandbox_id, (set(), set()))
        return sorted(containers), sorted(volumes)

    def _layers_of(self, container_id: str) -> tuple[str, list[str]] | None:
        """The container's overlay2 (upper, lowers), asked of the engine once (None: another driver)."""
        if container_id not in self._layers:
            graph = self.api.inspect_container(container_id).get("GraphDriver") or {}
            data = graph.get("Data") or {}
            upper, lower = data.get("UpperDir"), data.get("LowerDir")
            self._layers[container_id] = (upper, lower.split(":")) if graph.get("Name") == "overlay2" and upper and lower else None
        return self._layers[container_id]

    async def warm_layers(self, container_id: str) -> None:
        """Learn the container's layers now (its start), so that reading its changes after the agent
        costs no engine call on the run's critical path."""
        try:
            await self._call(self._layers_of, container_id)
        except Exception as exc:  # noqa: BLE001 - container_changes asks again
            log.debug("cannot inspect the layers of %s yet: %s", container_id[:12], exc)

    async def container_changes(self, container_id: str) -> list[dict[str, Any]]:
        """The container's filesystem changes as the engine's diff gives them ({Path, Kind}): read from
        its overlay2 upper directory when that is on this host (layer_diff.py: milliseconds), else
        asked of the engine (a walk of the layer)."""
        def read() -> list[dict[str, Any]]:
            layers = self._layers_of(container_id)
            if layers is not None:
                try:
                    return layer_diff.changes(*layers)
                except layer_diff.LayerUnreadable as exc:
                    log.debug("reading the layers of %s here failed (%s): asking the engine", container_id[:12], exc)
            return list(self.api.diff(container_id) or [])

        return await self._call(read)

    def _remove_container(self, id_or_name: str) -> None:
        import docker.errors

        try:
            self.api.remove_container(id_or_name, force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if "already in progress" in str(exc) or exc.status_code == 404:
                return
            raise

    async def container_state(self, id_or_name: str) -> dict[str, Any] | None:
        return await self._call(self._container_state, id_or_name)

    def _container_state(self, id_or_name: str) -> dict[str, Any] | None:
        import docker.errors

        try:
            return self.api.inspect_container(id_or_name)["State"]
        except docker.errors.NotFound:
            return None

    async def logs(self, id_or_name: str, tail: int = 40) -> str:
        def read() -> str:
            try:
                raw = self.api.logs(id_or_name, stdout=True, stderr=True, tail=tail)
            except Exception as exc:
                return f"(logs unavailable: {exc})"
            return raw.decode("utf-8", "replace")

        return await self._call(read)

    async def output(self, id_or_name: str, stream: str, keep_bytes: int) -> bytes:
        """The last `keep_bytes` of what the container wrote to `stream` ("stdout" | "stderr"),
        streamed from the engine (never all of it in memory)."""
        def read() -> bytes:
            kept = bytearray()
            chunks = self.api.logs(id_or_name, stdout=stream == "stdout", stderr=stream == "stderr", stream=True,
                                   follow=False)
            for chunk in chunks:
                kept += chunk
                if len(kept) > 2 * keep_bytes:
                    del kept[:-keep_bytes]
            return bytes(kept[-keep_bytes:])

        return await self._call(read)

    # --- exec --------------------------------------------------------------------------------

    async def exec(self, container: str, argv: list[str], *, env: dict[str, str] | None = None, workdir: str | None = None,
                   user: str | None = None, detach: bool = False, watchdog_s: float | None = None,
                   output_cap: int = OUTPUT_CAP_BYTES) -> RawExec:
        return await self._call(self._exec, container, argv, env, workdir, user, detach, watchdog_s, output_cap)

    def _exec(self, container: str, argv: list[str], env: dict[str, str] | None, workdir: str | None, user: str | None,
              detach: bool, watchdog_s: float | None, output_cap: int) -> RawExec:
        import docker.errors

        _, api = self._clients()
        started = time.monotonic()
        created = api.exec_create(container, argv, stdout=not detach, stderr=not detach, environment=env or None,
                                  workdir=workdir, user=user or "")
        exec_id = created["Id"]
        if detach:
            api.exec_start(exec_id, detach=True)
            return RawExec(exit_code=None, stdout=b"", stderr=b"", duration_s=time.monotonic() - started)
        out, err = bytearray(), bytearray()
        dropped = [0, 0]
        broken = False
        killed = threading.Event()
        timer = None
        if watchdog_s is not None:
            timer = threading.Timer(watchdog_s, self._kill_exec, (api, exec_id, killed))
            timer.daemon = True
            timer.start()
        try:
            stream = api.exec_start(exec_id, stream=True, demux=True)
        except Exception:
            if timer is not None:
                timer.cancel()
            raise
        try:
            for chunk_out, chunk_err in stream:
                for chunk, buf, i in ((chunk_out, out, 0), (chunk_err, err, 1)):
                    if not chunk:
                        continue
                    room = output_cap - len(buf)
                    if room > 0:
                        buf += chunk[:room]
                    if len(chunk) > max(room, 0):
                        dropped[i] += len(chunk) - max(room, 0)
        except Exception as exc:  # the connection broke (container removed mid-command, engine restart)
            log.info("exec %s output stream ended early: %s", exec_id[:12], exc)
            broken = True
        finally:
            if timer is not None:
                timer.cancel()
        exit_code = None
        for _ in range(50):
            try:
                info = api.exec_inspect(exec_id)
            except docker.errors.NotFound:  # the container went away meanwhile
                break
            except Exception:  # noqa: BLE001
                # A restarting engine closes the stream cleanly, so only its silence now tells that the
                # command did not simply end: the engine's loss, not the command's outcome.
                broken = True
                break
            if not info.get("Running"):
                exit_code = info.get("ExitCode")
                break
            time.sleep(0.02)
        return RawExec(exit_code=exit_code, stdout=bytes(out), stderr=bytes(err), stdout_dropped=dropped[0],
                       stderr_dropped=dropped[1], duration_s=time.monotonic() - started, killed_by_watchdog=killed.is_set(),
                       stream_broken=broken)

    @staticmethod
    def _kill_exec(api: docker.APIClient, exec_id: str, killed: threading.Event) -> None:
        """Last resort when the in-container `timeout` wrapper did not end the command: SIGKILL
        the exec'd process by its host pid (works when svcd shares the engine's host)."""
        try:
            pid = api.exec_inspect(exec_id).get("Pid")
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed.set()
        except Exception as exc:
            log.warning("could not kill runaway exec %s: %s", exec_id[:12], exc)

    async def put_file(self, container: str, path: str, data: bytes, mode: int = 0o644) -> None:
        directory, _, name = path.rpartition("/")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        await self._call(lambda: self.api.put_archive(container, directory or "/", buf.getvalue()))

    async def published_ports(self, container_id: str) -> dict[int, tuple[str, int]]:
        """Container port -> (host ip, host port) of its published TCP ports."""
        def read() -> dict[int, tuple[str, int]]:
            ports = (self.api.inspect_container(container_id).get("NetworkSettings") or {}).get("Ports") or {}
            out: dict[int, tuple[str, int]] = {}
            for key, bindings in ports.items():
                if bindings and key.endswith("/tcp"):
                    out[int(key.split("/")[0])] = (bindings[0]["HostIp"], int(bindings[0]["HostPort"]))
            return out

        return await self._call(read)

    # --- host-side probes --------------------------------------------------------------------

    async def writable_layer_size(self, container_id: str) -> int:
        """Bytes the container wrote outside its mounts: its overlay2 upper directory walked on this
        host when it is here (what the engine's SizeRw walks), else the engine's SizeRw."""
        def read() -> int:
            layers = self._layers_of(container_id)
            if layers is not None:
                try:
                    return layer_diff.size(layers[0])
                except layer_diff.LayerUnreadable as exc:
                    log.debug("walking the layer of %s here failed (%s): asking the engine", container_id[:12], exc)
            api = self.api
            data = api._result(api._get(api._url("/containers/{0}/json", container_id), params={"size": 1}), True)
            return int(data.get("SizeRw") or 0)

        return await self._call(read)

    async def oom_kill_count(self, container_id: str) -> int | None:
        """How many processes the kernel's OOM killer has killed in the container's memory cgroup
        (cgroup v1 `memory.oom_control` or v2 `memory.events`), read on the host; falls back to
        reading the same file inside the container."""
        import docker.errors

        count = _host_oom_kills(container_id)
        if count is not None:
            return count
        try:
            raw = await self.exec(
                container_id,
                ["cat", "/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"],
                watchdog_s=10,
            )
        except docker.errors.APIError as exc:
            if exc.status_code in (404, 409):  # the container is gone or stopped (its agent ended it): unknown
                return None
            raise
        return _parse_oom_kills(raw.stdout.decode("utf-8", "replace"))

    def room_for(self, nano_cpus: int, memory: int) -> bool:
        """Always: this machine's limits are the scheduler's and the pool's own bounds."""
        return True

    async def process_count(self, container_id: str) -> int | None:
        """How many processes the container has, read from its cgroup on this host (the kernel's
        list: nothing in the container can hide from it; one small sysfs read, no engine call); None
        when the cgroup is not readable here."""
        for path in (f"/sys/fs/cgroup/pids/docker/{container_id}/cgroup.procs",
                     f"/sys/fs/cgroup/pids/system.slice/docker-{container_id}.scope/cgroup.procs",
                     f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cgroup.procs",
                     f"/sys/fs/cgroup/docker/{container_id}/cgroup.procs"):
            try:
                with open(path) as fh:
                    return sum(1 for line in fh if line.strip())
            except OSError:
                continue
        return None

    def listening_ports(self, pid: int) -> set[int] | None:
        """TCP ports in LISTEN state inside the network namespace of host process `pid`, read from
        `/proc/<pid>/net/tcp{,6}` without entering the container; None when unreadable."""
        ports: set[int] = set()
        readable = False
        for name in ("tcp", "tcp6"):
            try:
                with open(f"/proc/{pid}/net/{name}") as fh:
                    readable = True
                    next(fh, None)
                    for line in fh:
                        parts = line.split()
                        if len(parts) > 3 and parts[3] == "0A":
                            ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            except (FileNotFoundError, PermissionError, ProcessLookupError, OSError):
                continue
        return ports if readable else None

    # --- reaping -----------------------------------------------------------------------------

    async def list_labelled(self, labels: dict[str, str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        filters = {"label": [f"{k}={v}" if v is not None else k for k, v in labels.items()]}

        def listing():
            containers = self.api.containers(all=True, filters=filters)
            networks = self.api.networks(filters=filters)
            return containers, networks

        return await self._call(listing)


def _split_ref(ref: str) -> tuple[str, str | None]:
    if "@" in ref:
        return ref, None
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
        return repo, tag
    return ref, "latest"


def _parse_oom_kills(text: str) -> int | None:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "oom_kill":
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def _host_oom_kills(container_id: str) -> int | None:
    candidates = [
        Path(f"/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control"),
        Path(f"/sys/fs/cgroup/memory/system.slice/docker-{container_id}.scope/memory.oom_control"),
        Path(f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events"),
        Path(f"/sys/fs/cgroup/docker/{container_id}/memory.events"),
    ]
    for path in candidates:
        try:
            return _parse_oom_kills(path.read_text())
        except OSError:
            continue
    return None
