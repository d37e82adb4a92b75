"""The container's filesystem changes read from its overlay2 layers on this host
(daemon/sandbox/engine/layer_diff.py) are the engine's own diff: the grader's tamper check and the
file rules read them, so the fast path must not see less than the engine does."""
from __future__ import annotations

import contextlib
import time

import pytest

from daemon.sandbox.engine import layer_diff
from tests.support.images import PYTHON

# modified, added, deleted files; a directory replaced whole (opaque); a link; a program shadowed
CHANGES = ("echo x > /usr/bin/cat; mkdir -p /usr/local/sbin && echo y > /usr/local/sbin/sh; rm /usr/bin/head; "
           "mkdir -p /opt/q/r && echo 1 > /opt/q/r/f; rm -rf /usr/share/doc && mkdir /usr/share/doc && "
           "echo n > /usr/share/doc/new; ln -s /etc/passwd /tmp/l; touch /ready; sleep 100")


@contextlib.contextmanager
def container_after(docker_client, script: str):
    """A container of the stock python image once `script` touched /ready (removed afterwards)."""
    container = docker_client.containers.run(PYTHON, ["sh", "-c", script], detach=True)
    try:
        deadline = time.monotonic() + 30
        while container.exec_run(["test", "-e", "/ready"]).exit_code != 0:
            assert time.monotonic() < deadline, "the container did not make its changes"
            time.sleep(0.1)
        yield container
    finally:
        container.remove(force=True)


@pytest.fixture
def changed_container(docker_client, stock_images):
    with container_after(docker_client, CHANGES) as container:
        yield container


def test_the_layer_walk_answers_what_the_engine_diff_answers(docker_client, changed_container):
    data = docker_client.api.inspect_container(changed_container.id)["GraphDriver"]["Data"]
    walked = layer_diff.changes(data["UpperDir"], data["LowerDir"].split(":"))
    engine = docker_client.api.diff(changed_container.id)
    assert sorted((e["Path"], e["Kind"]) for e in walked) == sorted((e["Path"], e["Kind"]) for e in engine)


# a big file, a hard link to it, a link to a big host file (never followed), a directory tree
SIZED = ("head -c 300000 /dev/zero > /tmp/big; ln /tmp/big /tmp/hard; ln -s /usr/local/bin/python3 /tmp/l; "
         "mkdir -p /opt/a/b && head -c 1234 /dev/zero > /opt/a/b/f; touch /ready; sleep 100")


def test_the_layer_size_walk_answers_what_the_engine_size_answers(docker_client, stock_images):
    """The container disk limit reads the writable layer's size here instead of asking the engine."""
    with container_after(docker_client, SIZED) as container:
        api = docker_client.api
        upper = api.inspect_container(container.id)["GraphDriver"]["Data"]["UpperDir"]
        engine = api._result(api._get(api._url("/containers/{0}/json", container.id), params={"size": 1}), True)
        assert layer_diff.size(upper) == engine["SizeRw"]


def test_a_layer_with_too_many_paths_is_left_to_the_engine(tmp_path, monkeypatch):
    monkeypatch.setattr(layer_diff, "MAX_ENTRIES", 5)
    for n in range(8):
        (tmp_path / f"f{n}").write_bytes(b"x")
    with pytest.raises(layer_diff.LayerUnreadable):
        layer_diff.size(str(tmp_path))
