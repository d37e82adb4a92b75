"""The chaos suite's faults and its after-checks (tests/chaos/): what every fault must leave true.

After each fault: the experiment ends with honest verdicts (infrastructure errors retried and
counted, never a `fail`), nothing acknowledged is lost, the store passes `PRAGMA integrity_check`,
and after a clean stop nothing labelled with the daemon's id is on the engine and no sandbox
directory is left under SERVICE_HOME's runtime directories.
"""
from __future__ import annotations

import asyncio
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import docker

from tests.support.engine_proxy import REAL_SOCKET, EngineProxy
from tests.support.waiting import wait_for

RUNTIME_DIRS = ("sandbox-runtime", "sandbox-evidence", "workspaces")


def real_engine() -> docker.APIClient:
    return docker.APIClient(base_url=f"unix://{REAL_SOCKET}")


async def drop_socket(proxy: EngineProxy) -> None:
    """The engine's socket is gone (not answering 500: no socket at all, connections refused)."""
    await proxy.cut()
    if proxy.server is not None:
        proxy.server.close()
        await proxy.server.wait_closed()
        proxy.server = None
    proxy.path.unlink(missing_ok=True)


async def bring_back(proxy: EngineProxy) -> None:
    proxy.restore()
    proxy.server = await asyncio.start_unix_server(proxy._serve, path=str(proxy.path))


async def agents_running(api: Any, real: docker.APIClient, n: int) -> list[str]:
    """Ids of this daemon's agent containers once `n` are running (their sandboxes are ready)."""
    response, page = await api.get("/v1/sandboxes", params={"state": "ready"})
    ids = {s["id"] for s in page.get("items", [])}
    containers = [c for c in await asyncio.to_thread(real.containers, filters={"label": "svc.role=agent"})
                  if c["Labels"].get("svc.sandbox") in ids]
    return [c["Id"] for c in containers] if len(containers) >= n else []


async def start_experiment(api: Any, spec: dict[str, Any], concurrency: int = 2) -> str:
    await api.upload_doc(spec)
    response, created = await api.post("/v1/experiments", json={"name": spec["id"], "spec_id": spec["id"],
                                                                 "concurrency": concurrency})
    assert response.status == 201, created
    response, body = await api.post(f"/v1/experiments/{created['id']}/run")
    assert response.status in (200, 202), body
    return str(created["id"])


async def experiment_outcome(api: Any, experiment_id: str, timeout: float = 300) -> dict[str, Any]:
    """The finished experiment's verdicts: {status, verdicts, failed, retried, replicas, earlier}
    (`earlier`: the statuses of the retried runs, none of which may be `failed`)."""
    async def finished():
        response, body = await api.get(f"/v1/experiments/{experiment_id}")
        return body if body["status"] in ("completed", "failed", "cancelled") else None

    body = await wait_for(finished, timeout=timeout, what="the experiment to finish", interval=0.5)
    scenarios = body["scenarios"]
    earlier = []
    for scenario in scenarios:
        for replica in scenario["runs"]:
            for run_id in replica["previous_run_ids"]:
                response, run = await api.get(f"/v1/runs/{run_id}")
                earlier.append(run.get("status") if response.status == 200 else "lost")
    return {"status": body["status"], "verdicts": [s["verdict"] for s in scenarios],
            "failed": sum(s["failed_runs"] for s in scenarios), "retried": sum(s["retried_runs"] for s in scenarios),
            "replicas": sum(len(s["runs"]) for s in scenarios), "earlier": earlier}


def integrity(home: Path) -> str:
    with sqlite3.connect(f"file:{home / 'svc.db'}?mode=ro", uri=True, timeout=30) as db:
        return ", ".join(str(row[0]) for row in db.execute("PRAGMA integrity_check"))


def leaked(daemon_id: str, home: Path, workspaces: Path | None = None) -> dict[str, list[str]]:
    """What a stopped daemon left: engine objects labelled with its id, sandbox directories."""
    real = real_engine()
    label = {"label": f"svc.daemon={daemon_id}"}
    left = {
        "containers": [c["Names"][0] for c in real.containers(all=True, filters=label)],
        "networks": [n["Name"] for n in real.networks(filters=label)],
        "volumes": [v["Name"] for v in real.volumes(filters=label).get("Volumes") or []],
        "dirs": [],
    }
    roots = [home / name for name in RUNTIME_DIRS] + ([workspaces] if workspaces else [])
    for root in roots:
        if root.is_dir():
            left["dirs"] += [str(p) for p in root.iterdir() if p.name.startswith(("sb-", "sbx_"))]
    return left


def nothing(left: dict[str, list[str]]) -> bool:
    return not any(left.values())


class SmallDisk:
    """A loop-mounted ext4 of `mib` MiB at `mountpoint` (root only): a SERVICE_HOME that fills."""

    def __init__(self, image: Path, mountpoint: Path, mib: int = 24):
        self.image, self.mountpoint, self.mib = image, mountpoint, mib

    def __enter__(self) -> "SmallDisk":
        subprocess.run(["truncate", "-s", f"{self.mib}M", str(self.image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(self.image)], check=True, capture_output=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-o", "loop", str(self.image), str(self.mountpoint)], check=True, capture_output=True)
        return self

    def fill(self) -> Path:
        """Fill what is free (the file is returned so `free` can delete it)."""
        filler = self.mountpoint / "filler"
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=64k"], capture_output=True)
        return filler

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True)
        self.image.unlink(missing_ok=True)
