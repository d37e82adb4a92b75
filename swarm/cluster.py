"""A small Docker Swarm on this machine: engine nodes as containers, a registry, svc's stock images.

    python swarm/cluster.py up [--nodes N]     # idempotent; prints how long each step took
    python swarm/cluster.py down               # removes nodes, their volumes, the registry, the network
    python swarm/cluster.py status

The node image is built from Debian packages (docker.io, docker-registry) with mmdebstrap like the
stock images and cached the same way. Nodes are not --privileged (this host refuses it): the
capability flags below are what the engine-in-a-container needs. Each node's engine listens on
tcp 2376 with --tlsverify only: a CA, a server certificate for the nodes and a client certificate,
made with openssl and kept in .svc-home/swarm/tls (tls.py). `up` ends by writing the settings that
point svcd at the swarm to .svc-home/swarm.env as NAME=value lines.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from daemon.sandbox import images  # noqa: E402  (the stock images' recipe machinery)
from swarm import ssh, tls  # noqa: E402

NODE_IMAGE = "localhost/svc/swarm-node:20.10"
NETWORK = "svc-swarm"
REGISTRY = "svc-swarm-registry"
REGISTRY_ADDR = f"{REGISTRY}:5000"
LABEL = "svc.swarm"
ENV_FILE = ROOT / ".svc-home" / "swarm.env"
SSH_ENV_FILE = ROOT / ".svc-home" / "swarm-ssh.env"  # the same swarm, every engine reached over ssh://
TLS_DIR = ROOT / ".svc-home" / "swarm" / "tls"
SSH_DIR = ROOT / ".svc-home" / "swarm" / "ssh"
ENGINE_PORT = 2376
MAX_NODES = 3
NODE_RECIPE = images.Recipe(
    packages=("docker.io", "docker-registry", "iptables", "ca-certificates", "procps", "iproute2", "tini", "mount",
              "openssh-server"),
    changes=(f"ENV PATH={images.DEFAULT_PATH}",),
)
# The entrypoint goes on in a small build on top of the imported packages (swarm/Dockerfile.node),
# so changing it does not re-run mmdebstrap.
# What replaces --privileged for an engine inside a container on this host.
NODE_FLAGS = (
    "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE",
    "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined",
    "--security-opt", "systempaths=unconfined", "--device-cgroup-rule", "a *:* rwm", "--cgroupns", "private",
)
STOCK = ("localhost/svc/python:3.11", "localhost/svc/postgres:15", "localhost/svc/redis:7")


def log(msg: str) -> None:
    print(f"[swarm] {msg}", file=sys.stderr, flush=True)


def docker(*args: str, host: str | None = None, check: bool = True, input: bytes | None = None) -> str:
    cmd = ["docker", *(tls.docker_flags(TLS_DIR) + ["-H", host] if host else []), *args]
    p = subprocess.run(cmd, capture_output=True, input=input)
    if check and p.returncode != 0:
        raise SystemExit(f"[swarm] failed: {' '.join(cmd)}: {p.stderr.decode(errors='replace').strip()}")
    return p.stdout.decode(errors="replace").strip()


class Step:
    """Times one step of `up` and prints it."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            log(f"{self.name}: {time.monotonic() - self.t0:.1f}s")


def node_name(i: int) -> str:
    return f"svc-swarm-{i}"


def build_node_image() -> None:
    base_key = NODE_RECIPE.image_key()
    base = f"localhost/svc/swarm-node-base:{base_key}"
    h = images.hashlib.sha256(base_key.encode())
    for name in ("Dockerfile.node", "node-entrypoint.sh"):
        h.update((ROOT / "swarm" / name).read_bytes())
    key = h.hexdigest()[:16]
    current = docker("image", "inspect", "--format", "{{index .Config.Labels \"svc.recipe\"}}", NODE_IMAGE, check=False)
    if current == key:
        return
    cdir = images.cache_dir()
    cdir.mkdir(parents=True, exist_ok=True)
    with images._lock(cdir / "svc-swarm-node.lock"):
        if not docker("image", "ls", "-q", base):
            docker("import", *[a for c in NODE_RECIPE.changes for a in ("--change", c)], str(node_rootfs(base_key, cdir)), base)
        docker("build", "-q", "-f", str(ROOT / "swarm" / "Dockerfile.node"), "--build-arg", f"BASE={base}",
               "--label", f"svc.recipe={key}", "-t", NODE_IMAGE, str(ROOT / "swarm"))


def node_rootfs(key: str, cdir: Path) -> Path:
    """The node's Debian root filesystem tarball, cached like the stock images' (keyed by recipe)."""
    tar = cdir / f"svc-swarm-node-{key}.tar"
    if tar.exists():
        return tar
    tmp = tar.with_suffix(".tmp")
    logfile = cdir / "svc-swarm-node.log"
    log(f"mmdebstrap the node image (log: {logfile})")
    with open(logfile, "w") as lf:
        p = subprocess.run(images._mmdebstrap_cmd(NODE_RECIPE, tmp), stdout=lf, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SystemExit(f"[swarm] mmdebstrap failed, see {logfile}")
    os.replace(tmp, tar)
    for old in cdir.glob("svc-swarm-node-*.tar"):
        if old != tar:
            old.unlink(missing_ok=True)
    return tar


def container_ip(name: str) -> str | None:
    out = docker("inspect", "--format", f"{{{{(index .NetworkSettings.Networks \"{NETWORK}\").IPAddress}}}}", name, check=False)
    return out or None


def running(name: str, certs: str = "") -> bool:
    """Running, from the current node image and with the current certificates (else it is replaced)."""
    state = docker("inspect", "--format", f"{{{{.State.Running}}}} {{{{.Image}}}} {{{{index .Config.Labels \"{LABEL}.tls\"}}}}",
                   name, check=False)
    return state.strip() == f"true {docker('image', 'inspect', '--format', '{{.Id}}', NODE_IMAGE)} {certs}".strip()


def start_network() -> None:
    if not docker("network", "ls", "-q", "--filter", f"name=^{NETWORK}$"):
        # A subnet of the engine's choosing (free on this host), configured by hand so nodes get fixed addresses.
        docker("network", "create", "--label", f"{LABEL}=1", NETWORK)
        subnet = docker("network", "inspect", "--format", "{{(index .IPAM.Config 0).Subnet}}", NETWORK)
        docker("network", "rm", NETWORK)
        docker("network", "create", "--label", f"{LABEL}=1", "--subnet", subnet, NETWORK)


def start_registry() -> None:
    if running(REGISTRY):
        return
    docker("rm", "-f", REGISTRY, check=False)
    # Its storage outlives the container: a registry replaced with a new node image still serves the
    # digests swarm.env names.
    docker("run", "-d", "--name", REGISTRY, "--hostname", REGISTRY, "--network", NETWORK, "--label", f"{LABEL}=1",
           "--restart", "unless-stopped", "-v", f"{REGISTRY}-data:/var/lib/docker-registry", NODE_IMAGE, "registry")


def node_ip(i: int) -> str:
    """A fixed address per node: a restarted node keeps the address the swarm and swarm.env know."""
    subnet = docker("network", "inspect", "--format", "{{(index .IPAM.Config 0).Subnet}}", NETWORK)
    return str(ipaddress.ip_network(subnet).network_address + 10 + i)


def start_node(i: int, certs: str) -> None:
    """A node whose engine serves TLS with the server certificate (copied in before it starts)."""
    name = node_name(i)
    if running(name, certs):
        return
    docker("rm", "-f", name, check=False)
    docker("create", "--name", name, "--hostname", name, "--network", NETWORK, "--ip", node_ip(i), "--label", f"{LABEL}=1",
           "--label", f"{LABEL}.node={i}", "--label", f"{LABEL}.tls={certs}", "-v", f"{name}-data:/var/lib/docker",
           *NODE_FLAGS, NODE_IMAGE)
    docker("cp", str(TLS_DIR / "server") + "/.", f"{name}:/etc/svc-tls")
    docker("cp", str(SSH_DIR / "node") + "/.", f"{name}:/etc/svc-ssh")
    docker("start", name)


def wait_engine(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if subprocess.run(["docker", *tls.docker_flags(TLS_DIR), "-H", url, "info"], capture_output=True).returncode == 0:
            return
        time.sleep(0.3)
    raise SystemExit(f"[swarm] the engine at {url} did not answer within {seconds:.0f}s")


def form_swarm(urls: dict[str, str]) -> None:
    names = list(urls)
    manager = urls[names[0]]
    state = docker("info", "--format", "{{.Swarm.LocalNodeState}}", host=manager)
    if state != "active":
        ip = manager.split("//")[1].split(":")[0]
        docker("swarm", "init", "--advertise-addr", ip, "--default-addr-pool", "10.201.0.0/16", host=manager)
    token = docker("swarm", "join-token", "-q", "worker", host=manager)
    manager_ip = manager.split("//")[1].split(":")[0]
    for name in names[1:]:
        if docker("info", "--format", "{{.Swarm.LocalNodeState}}", host=urls[name]) != "active":
            ip = urls[name].split("//")[1].split(":")[0]
            docker("swarm", "join", "--token", token, "--advertise-addr", ip, f"{manager_ip}:2377", host=urls[name])
    for name in names:
        docker("node", "update", "--label-add", f"svc.node={name}", name, host=manager)


def pushed_ref(image: str, host_id: str, manager: str) -> str | None:
    """The registry reference by digest of `image` when the manager holds this very image (same id)
    and the registry still serves that digest; then nothing needs loading or pushing."""
    repo = f"{REGISTRY_ADDR}/{image.split('/', 1)[1]}"
    if docker("image", "inspect", "--format", "{{.Id}}", repo, host=manager, check=False) != host_id:
        return None
    digests = json.loads(docker("image", "inspect", "--format", "{{json .RepoDigests}}", repo, host=manager) or "[]")
    ref = next((d for d in digests if d.startswith(REGISTRY_ADDR)), None)
    if ref is None:
        return None
    # A pull by digest asks the registry for the manifest (a recreated registry container starts empty).
    probe = subprocess.run(["docker", *tls.docker_flags(TLS_DIR), "-H", manager, "pull", "-q", ref], capture_output=True)
    return ref if probe.returncode == 0 else None


def push_images(manager: str) -> dict[str, str]:
    """Load the stock images into the manager and push them to the registry; stock name -> digest ref."""
    refs: dict[str, str] = {}
    for image in STOCK:
        host_id = docker("image", "inspect", "--format", "{{.Id}}", image)
        ready = pushed_ref(image, host_id, manager)
        if ready is not None:
            refs[image] = ready
            continue
        if docker("image", "inspect", "--format", "{{.Id}}", image, host=manager, check=False) != host_id:
            saved = subprocess.run(["docker", "save", image], capture_output=True, check=True).stdout
            docker("load", host=manager, input=saved)
        repo = f"{REGISTRY_ADDR}/{image.split('/', 1)[1]}"
        docker("tag", image, repo, host=manager)
        docker("push", repo, host=manager)
        digests = json.loads(docker("image", "inspect", "--format", "{{json .RepoDigests}}", repo, host=manager))
        refs[image] = next(d for d in digests if d.startswith(REGISTRY_ADDR))
    return refs


def node_urls(count: int) -> dict[str, str]:
    urls = {}
    for i in range(1, count + 1):
        ip = container_ip(node_name(i))
        if not ip:
            raise SystemExit(f"[swarm] node {node_name(i)} has no address on {NETWORK}")
        urls[node_name(i)] = f"tcp://{ip}:{ENGINE_PORT}"
    return urls


def up(count: int) -> None:
    """One `up` at a time (make test starts one in the background; the tests' fixture waits for it)."""
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        raise SystemExit("[swarm] the Docker engine on this machine does not answer (`docker info` failed; "
                         "start it with .ci/docker.sh)")
    with images._lock(images.cache_dir() / "svc-swarm-up.lock"):
        _up(count)


def _up(count: int) -> None:
    total = time.monotonic()
    with Step("node image"):
        build_node_image()
    with Step("network + registry + nodes started"):
        start_network()
        start_registry()
        # The server certificate names every address a node can have, so adding nodes keeps it.
        certs = tls.ensure(TLS_DIR, [node_ip(i) for i in range(1, MAX_NODES + 1)],
                           [node_name(i) for i in range(1, MAX_NODES + 1)])
        certs += "-" + ssh.ensure(SSH_DIR, [node_ip(i) for i in range(1, MAX_NODES + 1)])
        for i in range(1, count + 1):
            start_node(i, certs)
    urls = node_urls(count)
    with Step("engines answering"):
        for url in urls.values():
            wait_engine(url)
    with Step("swarm formed"):
        form_swarm(urls)
    with Step("stock images pushed"):
        refs = push_images(urls[node_name(1)])
    lines = {
        "SERVICE_ENGINE": "swarm",
        "SERVICE_SWARM_MANAGER": urls[node_name(1)],
        "SERVICE_SWARM_NODES": ",".join(f"{n}={u}" for n, u in urls.items()),
        "SERVICE_SWARM_IMAGES": ",".join(f"{k}={v}" for k, v in refs.items()),
        "SERVICE_SWARM_CERT_PATH": str(TLS_DIR / "client"),
    }
    ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
    ENV_FILE.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    log(f"wrote {ENV_FILE}")
    over_ssh = {name: f"ssh://root@{url.split('//')[1].split(':')[0]}" for name, url in urls.items()}
    ssh_lines = {**lines, "SERVICE_SWARM_MANAGER": over_ssh[node_name(1)],
                 "SERVICE_SWARM_NODES": ",".join(f"{n}={u}" for n, u in over_ssh.items()),
                 "SERVICE_SWARM_CERT_PATH": "", "SERVICE_SWARM_SSH_CONFIG": str(SSH_DIR / "ssh_config")}
    SSH_ENV_FILE.write_text("".join(f"{k}={v}\n" for k, v in ssh_lines.items()))
    log(f"wrote {SSH_ENV_FILE}")
    log(f"swarm up ({count} nodes): {time.monotonic() - total:.1f}s")


def down() -> None:
    t0 = time.monotonic()
    names = docker("ps", "-aq", "--filter", f"label={LABEL}").split()
    if names:
        docker("rm", "-f", "-v", *names)
    for vol in docker("volume", "ls", "-q", "--filter", "name=svc-swarm-").split():
        docker("volume", "rm", "-f", vol, check=False)
    docker("network", "rm", NETWORK, check=False)
    ENV_FILE.unlink(missing_ok=True)
    SSH_ENV_FILE.unlink(missing_ok=True)
    log(f"swarm down: {time.monotonic() - t0:.1f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="swarm/cluster.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--nodes", type=int, default=int(os.environ.get("SVC_SWARM_NODES", "2")))
    sub.add_parser("down")
    sub.add_parser("status")
    args = parser.parse_args(argv)
    if args.cmd == "up":
        up(max(1, min(args.nodes, MAX_NODES)))
    elif args.cmd == "down":
        down()
    else:
        print(ENV_FILE.read_text() if ENV_FILE.exists() else "no swarm (run make swarm-up)", end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
