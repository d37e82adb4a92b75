"""Identifiers and deterministic seeds for experiments, scenarios, suites and their replicas."""
from __future__ import annotations

import hashlib

from daemon.util import new_id


def experiment_id() -> str:
    return new_id("exp-")


def scenario_id() -> str:
    return new_id("scn_")


def suite_id() -> str:
    return new_id("rep_")


def job_id() -> str:
    return new_id("job_")


def run_id() -> str:
    return new_id("run_")


def derive_seed(base: str, matrix_index: int, replica_index: int) -> str:
    """The seed of one replica: a pure function of the base seed (an experiment's `seed`, by
    default its id; a suite's id) and the replica's position, so re-running with the same base
    seed reproduces every replica."""
    digest = hashlib.sha256(f"{base}/{matrix_index}/{replica_index}".encode()).hexdigest()
    return "seed_" + digest[:16]
