"""The stock sandbox images, against a real Docker engine.

Every container and network carries ``svc.test=1`` plus a per-module run id
and is removed in ``finally``.
"""

from __future__ import annotations

import uuid

import pytest

from daemon.sandbox.images import STOCK_IMAGES, ensure_stock_images, image_is_current
from tests.support.images import POSTGRES, PYTHON, REDIS
from tests.support.waiting import eventually_sync

PY, PG = PYTHON, POSTGRES

RUN_ID = uuid.uuid4().hex[:8]
LABELS = {"svc.test": "1", "svc.test.run": RUN_ID}


class Sandbox:
    """Creates labelled containers/networks and removes all of them."""

    def __init__(self, client):
        self.client = client
        self.containers: list = []
        self.networks: list = []

    def network(self) -> str:
        net = self.client.networks.create(
            f"svc-test-{RUN_ID}-{uuid.uuid4().hex[:6]}", driver="bridge",
            internal=True, labels=LABELS,
        )
        self.networks.append(net)
        return net.name

    def start(self, image: str, *, network: str, alias: str, **kw):
        c = self.client.containers.create(
            image, labels=LABELS, network=network,
            networking_config={
                network: self.client.api.create_endpoint_config(aliases=[alias])
            },
            **kw,
        )
        self.containers.append(c)
        c.start()
        return c

    def run(self, image: str, command, *, network: str | None = None,
            timeout: float = 120, **kw) -> tuple[int, str]:
        """Run to completion; return (exit code, stdout+stderr)."""
        c = self.client.containers.create(
            image, command, labels=LABELS, network=network, **kw
        )
        self.containers.append(c)
        c.start()
        code = c.wait(timeout=timeout)["StatusCode"]
        return code, c.logs(stdout=True, stderr=True).decode(errors="replace")

    def close(self) -> None:
        for c in self.containers:
            try:
                c.remove(force=True, v=True)
            except Exception:
                pass
        for n in self.networks:
            try:
                n.remove()
            except Exception:
                pass


@pytest.fixture
def sandbox(docker_client, stock_images):
    sb = Sandbox(docker_client)
    try:
        yield sb
    finally:
        sb.close()
    leftovers = docker_client.containers.list(
        all=True, filters={"label": f"svc.test.run={RUN_ID}"}
    )
    assert not leftovers, f"containers left behind: {[c.name for c in leftovers]}"


def wait_for(fn, timeout: float = 60, interval: float = 0.5):
    return eventually_sync(fn, timeout, interval)


# --- images themselves -------------------------------------------------------

def test_stock_images_are_current_and_idempotent(docker_client, stock_images):
    assert set(stock_images) == set(STOCK_IMAGES)
    for name in STOCK_IMAGES:
        assert image_is_current(name), name
        img = docker_client.images.get(name)
        assert name in img.tags
    assert ensure_stock_images(log=lambda _m: None) == []  # nothing to rebuild


def test_python_image(sandbox):
    code, out = sandbox.run(PY, ["python3", "-c", "import sys; print(sys.version)"])
    assert code == 0, out
    assert out.startswith("3.11."), out

    script = (
        "set -e; pwd; python --version; psql --version; redis-cli --version; "
        "command -v curl nc ip ps timeout faketime; "
        "test -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1; "
        "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 "
        "FAKETIME='2024-01-01 00:00:00' date -u +%F; "
        "python3 -m venv /tmp/v && /tmp/v/bin/python -c 'print(\"venv-ok\")'"
    )
    code, out = sandbox.run(PY, ["sh", "-c", script])
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == "/workspace"
    assert lines[1].startswith("Python 3.11"), out
    assert "psql (PostgreSQL) 15" in out
    assert "redis-cli 7." in out
    assert "2024-01-01" in out
    assert "venv-ok" in out

    cfg = sandbox.client.images.get(PY).attrs["Config"]
    assert cfg["Cmd"] == ["python3"]
    assert cfg["WorkingDir"] == "/workspace"
    assert any(e.startswith("PATH=") for e in cfg["Env"])


# --- postgres ----------------------------------------------------------------

def _pg_ready_cmd(host: str) -> str:
    return (
        f"ok=; for i in $(seq 1 120); do pg_isready -q -h {host} && {{ ok=1; break; }}; "
        f"sleep 0.5; done; [ -n \"$ok\" ] || {{ echo 'postgres not ready' >&2; exit 1; }}"
    )


def test_postgres_password_login_from_another_container(sandbox):
    net = sandbox.network()
    db = sandbox.start(
        PG, network=net, alias="db",
        environment={"POSTGRES_USER": "u", "POSTGRES_PASSWORD": "p", "POSTGRES_DB": "d"},
    )
    code, out = sandbox.run(
        PY,
        ["sh", "-c", _pg_ready_cmd("db") + "\n"
         "psql -X -At postgresql://u:p@db/d -c 'select 1'"],
        network=net,
    )
    assert code == 0, out + db.logs().decode(errors="replace")
    assert out.strip().splitlines()[-1] == "1"

    # Password auth over TCP: a wrong password is rejected.
    code, out = sandbox.run(
        PY, ["psql", "-X", "postgresql://u:wrong@db/d", "-c", "select 1"], network=net
    )
    assert code != 0
    assert "password authentication failed" in out

    # The user is a superuser owning database d, like the official image.
    code, out = sandbox.run(
        PY,
        ["psql", "-X", "-At", "postgresql://u:p@db/d", "-c",
         "select rolsuper from pg_roles where rolname = current_user"],
        network=net,
    )
    assert code == 0 and out.strip() == "t", out

    # The readiness line is printed once, by the final server.
    logs = db.logs().decode(errors="replace")
    assert logs.count("database system is ready to accept connections") == 1, logs

    # `docker stop` shuts it down cleanly (SIGINT = fast shutdown; a SIGKILL after the grace period
    # would exit 137).
    db.stop(timeout=20)
    db.reload()
    assert db.attrs["State"]["ExitCode"] == 0
    assert "database system is shut down" in db.logs().decode(errors="replace")


def test_postgres_defaults_and_missing_password(sandbox):
    net = sandbox.network()
    sandbox.start(PG, network=net, alias="pg", environment={"POSTGRES_PASSWORD": "secret"})
    code, out = sandbox.run(
        PY,
        ["sh", "-c", _pg_ready_cmd("pg") + "\n"
         "psql -X -At postgresql://postgres:secret@pg/postgres -c 'select current_user'"],
        network=net,
    )
    assert code == 0, out
    assert out.strip().splitlines()[-1] == "postgres"

    # Like the official image: refuse to start without a password.
    code, out = sandbox.run(PG, None, network=net, timeout=60)
    assert code == 1
    assert "POSTGRES_PASSWORD is not set" in out


def test_postgres_image_runs_other_commands(sandbox):
    code, out = sandbox.run(PG, ["pg_isready", "--version"])
    assert code == 0 and "15." in out, out


# --- redis -------------------------------------------------------------------

def test_redis_answers_ping_by_name(sandbox):
    net = sandbox.network()
    r = sandbox.start(REDIS, network=net, alias="cache")
    code, out = sandbox.run(
        PY,
        ["sh", "-c",
         "for i in $(seq 1 60); do [ \"$(redis-cli -h cache ping 2>/dev/null)\" = PONG ] "
         "&& break; sleep 0.5; done; redis-cli -h cache ping; "
         "redis-cli -h cache set k v >/dev/null; redis-cli -h cache get k; "
         "redis-cli -h cache info server | grep -o 'redis_version:7[.0-9]*'"],
        network=net,
    )
    assert code == 0, out
    assert out.split() == ["PONG", "v", out.split()[-1]]
    assert out.split()[-1].startswith("redis_version:7.")
    assert "Ready to accept connections" in r.logs().decode(errors="replace")

    r.stop(timeout=20)
