"""What the experiment benches share: upload a spec, create and start its experiment, wait for it,
against an in-process daemon app (aiohttp TestClient)."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from aiohttp.test_utils import TestClient

from client.config import read_env_file


def admin_headers(settings: Any) -> dict[str, str]:
    return {"Authorization": "Bearer " + read_env_file(settings.credentials_path)["SERVICE_API_KEY"]}


async def launch(client: TestClient, headers: dict[str, str], name: str, yaml_text: str, concurrency: int) -> tuple[str, float]:
    """Upload `yaml_text` as spec `name`, create its experiment and start it: (experiment id, start time)."""
    response = await client.post("/v1/specs", json={"name": name, "yaml": yaml_text}, headers=headers)
    assert response.status in (200, 201), await response.text()
    response = await client.post("/v1/experiments", json={"spec_id": name, "concurrency": concurrency}, headers=headers)
    created = await response.json()
    started = time.perf_counter()
    response = await client.post(f"/v1/experiments/{created['id']}/run", headers=headers)
    assert response.status == 202, await response.text()
    return created["id"], started


async def finished(client: TestClient, headers: dict[str, str], experiment_id: str, interval_s: float) -> dict[str, Any]:
    """The experiment's full record once it is no longer running. It waits on the experiment's event
    stream (its `done`), so what is timed is the daemon, not a poll whose every answer costs O(runs);
    `interval_s` paces a poll only if the stream ends early."""
    async with client.get(f"/v1/experiments/{experiment_id}/stream", headers=headers) as stream:
        async for line in stream.content:
            if line.startswith(b"data:") and b'"type":"done"' in line.replace(b" ", b""):
                break
    while True:
        response = await client.get(f"/v1/experiments/{experiment_id}", headers=headers)
        record = await response.json()
        if record["status"] != "running":
            return record
        await asyncio.sleep(interval_s)
