"""What the experiment and suite kinds share: a group's loaded context, its failure, and the
per-replica stream event. (No import of the service or of a kind: both import this.)"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daemon.spec import SpecDocument
from daemon.store.db import loads


COMPLETED_HOOKS_KEY = "experiments.completed_hooks"  # app key: [async hook(app, experiment_id, status)]


class GroupFailed(Exception):
    """The experiment or suite itself cannot proceed (for example its spec version is gone)."""


@dataclass
class GroupContext:
    kind: str  # experiment | suite (the engine kind's name)
    id: str
    tenant_id: str
    spec_record: dict[str, Any]
    spec: SpecDocument
    inputs: dict[str, Any] | None
    cap: int | None
    secret_names: list[str] = field(default_factory=list)

    @property
    def limit_key(self) -> str:
        return f"{self.tenant_id}:{self.spec_record['id']}"

    @property
    def key_limit(self) -> int | None:
        return self.spec.resources.concurrency_limit


def replica_event(job: Any) -> dict[str, Any]:
    """The replica stream's per-completion event (DECISIONS: {type, index, seed, run_id, status,
    score, duration_ms})."""
    run = loads(job["result"], None) or {}
    duration = run.get("duration_ms")
    return {
        "type": "replica",
        "index": job["replica_index"],
        "seed": job["seed"],
        "run_id": job["run_id"],
        "status": job["status"],
        "score": job["score"],
        "duration_ms": duration if isinstance(duration, int) else job["wall_ms"],
    }
