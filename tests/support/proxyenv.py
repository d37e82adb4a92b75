"""Container plumbing shared by the egress proxy tests and the audit benchmark: labelled networks
and containers that are always removed, exec helpers, and the audit file the egress proxy writes.

Every network created here is `internal` (no route out of this machine): the tests never send a
packet anywhere but between their own containers."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from tests.support.images import POSTGRES, PYTHON
from tests.support.waiting import eventually_sync

PY = PYTHON
PG = POSTGRES
PROGRAMS = Path(__file__).resolve().parents[2] / "daemon" / "sandbox" / "programs"
PGWIRE = Path(__file__).with_name("pgwire.py")  # a script run inside containers


class Lab:
    def __init__(self, client, prefix: str = "svc-test"):
        self.client = client
        self.run = uuid.uuid4().hex[:8]
        self.prefix = f"{prefix}-{self.run}"
        self.labels = {"svc.test": "1", "svc.test.run": self.run}
        self.containers: list = []
        self.networks: list = []
        self.tmp = Path(tempfile.mkdtemp(prefix="svc-proxy-test-"))
        self.tmp.chmod(0o777)

    def network(self, name: str, internal: bool = True) -> str:
        net = self.client.networks.create(f"{self.prefix}-{name}", driver="bridge", internal=internal, labels=self.labels)
        self.networks.append(net)
        return net.name

    def start(self, image: str, command=None, *, network: str, aliases: list[str] = (), extra_networks: dict | None = None,
              name: str | None = None, **kw):
        c = self.client.containers.create(
            image, command, labels=self.labels, network=network, name=f"{self.prefix}-{name}" if name else None,
            networking_config={network: self.client.api.create_endpoint_config(aliases=list(aliases) or None)},
            **kw,
        )
        self.containers.append(c)
        for net, net_aliases in (extra_networks or {}).items():
            self.client.api.connect_container_to_network(c.id, net, aliases=list(net_aliases) or None)
        c.start()
        return c

    def proxy(self, kind: str, config: dict, *, network: str, aliases: list[str], extra_networks: dict | None = None,
              audit_name: str | None = None, **kw):
        """An egress proxy (`kind="egress"`, the only kind); its audit file is returned with it."""
        assert kind == "egress", kind
        audit_dir = self.tmp / (audit_name or aliases[0])
        audit_dir.mkdir(mode=0o777)
        config = {**config, "audit_file": "/svc-audit/audit.jsonl"}
        c = self.start(PY, ["python3", "-u", "/svc-programs/egress_proxy.py"], network=network, aliases=aliases,
                       extra_networks=extra_networks, environment={"SVC_EGRESS_CONFIG": json.dumps(config)},
                       volumes={str(PROGRAMS): {"bind": "/svc-programs", "mode": "ro"},
                                str(audit_dir): {"bind": "/svc-audit", "mode": "rw"}}, **kw)
        return c, audit_dir / "audit.jsonl"

    def close(self) -> None:
        for c in self.containers:
            try:
                c.remove(force=True, v=True)
            except Exception:
                pass
        for n in self.networks:
            for _ in range(20):
                try:
                    n.remove()
                    break
                except Exception:
                    time.sleep(0.2)
        shutil.rmtree(self.tmp, ignore_errors=True)


def sh(container, script: str, timeout: float = 60, env: dict | None = None) -> tuple[int, str]:
    """Run `script` with sh in a running container: (exit code, stdout+stderr)."""
    code, out = container.exec_run(["timeout", str(int(timeout)), "sh", "-c", script], environment=env or None)
    return code, out.decode("utf-8", "replace")


def ip_of(container, network: str) -> str:
    container.reload()
    return container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]


def events(path: Path, type_: str | None = None) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = [json.loads(line) for line in lines if line.strip()]
    return [e for e in out if type_ is None or e["type"] == type_]


def wait_for(fn, timeout: float = 30, interval: float = 0.1):
    return eventually_sync(fn, timeout, interval)


def wait_port(container, host: str, port: int, timeout: float = 60) -> None:
    code, out = sh(container, f"for i in $(seq 1 {int(timeout * 5)}); do nc -z {host} {port} && exit 0; sleep 0.2; done; exit 1",
                   timeout=timeout + 5)
    assert code == 0, f"{host}:{port} did not open: {out}"
