"""The warm pool's shape (daemon/sandbox/pool.py shape_key): what a run binds at claim time (task,
seed, clock instant, setup commands, timeout) does not split a pool; what the containers are made
from does; `dns: static` is never pooled, a swarm's shapes are (tests/swarm/test_swarm_pool.py)."""
from __future__ import annotations

from daemon.sandbox.models import Limits
from daemon.sandbox.pool import poolable, shape_key
from daemon.spec import models as spec_models
from tests.support.images import PYTHON


def load(**extra):
    doc = {"version": 1, "id": "x", "base": PYTHON, "task": {"prompt": "p"},
           "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}}, **extra}
    return spec_models.SpecDocument.model_validate(doc)


def key(spec, limits: Limits | None = None, bundle: bool = False) -> str:
    return shape_key(shape="B", image=spec.base, spec=spec, names=None, limits=limits or Limits(), bundle=bundle,
                     snapshot_egress=None, fixture_files=None, runtime="docker")


def test_the_run_s_own_values_share_one_shape():
    a = load(task={"prompt": "one"}, determinism={"seed": 1, "clock": "2024-01-01T00:00:00Z"},
             setup={"commands": ["true"]})
    b = load(task={"prompt": "two"}, determinism={"seed": 2, "clock": "2030-06-01T12:00:00Z"})
    assert key(a, Limits(timeout=60)) == key(b, Limits(timeout=600))


def test_what_the_containers_are_made_of_splits_the_shape():
    base = load()
    variants = [load(services=[{"name": "db", "type": "postgres"}]), load(agent={"type": "cli", "binary": "sh", "env": {"A": "1"}}),
                load(network={"egress": {"default": "allow"}}), load(determinism={"seed": 1})]
    keys = {key(base), key(base, Limits(memory=2 * 1024**3)), key(base, bundle=True), *(key(v) for v in variants)}
    assert len(keys) == 7


def test_static_dns_is_not_pooled_and_the_swarm_is():
    assert (poolable(load(determinism={"dns": "static"}), "docker"), poolable(load(), "swarm"), poolable(load(), "docker")) == (
        False, True, True)


def test_a_model_gateway_splits_the_shape():
    """A pooled sandbox booted without the gateway's container is never given to a spec with models:"""
    bare = load(secrets={"K": "env"})
    with_gateway = load(secrets={"K": "env"}, models={"providers": {"openai": {"key": "K"}}})
    assert key(bare) != key(with_gateway)
