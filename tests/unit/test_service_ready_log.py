"""A postgres service is ready when its log shows a TCP listener and then the ready line
(daemon/sandbox/services.py `in_order`): the entrypoint's init server, on the Unix socket only,
does not count."""
from __future__ import annotations

from pathlib import Path

from daemon.sandbox.services import in_order, plan_services

INIT_THEN_READY = """\
LOG:  listening on Unix socket "/var/run/postgresql/.s.PGSQL.5432"
LOG:  database system is ready to accept connections
LOG:  received fast shutdown request
LOG:  listening on IPv4 address "0.0.0.0", port 5432
LOG:  database system is ready to accept connections
"""


def postgres_ready_log() -> tuple[str, ...]:
    [plan] = plan_services(None, ["postgres"], "seed", Path("/nonexistent"))
    return plan.ready_log


def test_the_real_server_ready_after_its_tcp_listener():
    assert in_order(INIT_THEN_READY, postgres_ready_log())


def test_the_init_server_alone_is_not_ready():
    init_only = INIT_THEN_READY.split("LOG:  received")[0]
    assert not in_order(init_only, postgres_ready_log())


def test_a_listener_without_the_ready_line_is_not_ready():
    assert not in_order('LOG:  listening on IPv4 address "0.0.0.0", port 5432\n', postgres_ready_log())
