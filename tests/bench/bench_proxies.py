"""Overhead of svc's audit, measured between real containers on one internal network.

    python -m tests.bench.bench_proxies [--seconds 5] [--clients 4] [--rounds 3]    (or: make bench-proxies)

* db audit inside the server (what sandboxes run, daemon/sandbox/db_audit.py): pgbench TPS (TPC-B-like
  default script at scale = clients, as pgbench's manual advises, and select-only `-S`) straight to a
  stock PostgreSQL as its superuser vs to one started with the audit's `SERVER_ARGS`
  (`wal_level=logical`), prepared with the audit's own `setup_sql` and `SLOT_SQL` and connected as
  the non-superuser role `agent`, while the product's own `DbAuditReader` on the real Docker driver
  drains the slot every `POLL_S` (one `db_write` per committed transaction, table and operation).
  Printed as ratios to direct (target >= 0.8), plus the rows the reader recorded. Direct and audited runs
  alternate, `--rounds` times each, and the medians are compared: on a shared machine one run of
  each swings by a third.
* egress proxy: requests/s of keep-alive HTTP clients to an `http_mock` straight vs through
  `egress_proxy.py` (http_calls audit on), printed as a ratio (target >= 0.8).

Prints numbers and asserts nothing. Needs the Docker engine and the stock images."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import threading
import time

import docker

from daemon.sandbox import db_audit
from daemon.sandbox.engine.docker import DockerDriver
from tests.support.proxyenv import PG, PROGRAMS, PY, Lab, sh, wait_port

MOCK = {"port": 80, "routes": [{"method": "GET", "path": "/hello", "response": {"status": 200, "body": {"hi": "there"}}}]}

HTTP_CLIENT = r"""
import http.client, sys, threading, time
host, port, url, seconds, clients = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
counts = [0] * clients
def run(i):
    c = http.client.HTTPConnection(host, port, timeout=10)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.request("GET", url)
        r = c.getresponse(); r.read()
        assert r.status == 200, r.status
        counts[i] += 1
threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
[t.start() for t in threads]; [t.join() for t in threads]
print(sum(counts) / seconds)
"""


def pgbench(lab: Lab, container, host: str, seconds: int, clients: int, extra: str = "", login: str = "") -> float:
    """`login`: e.g. `-U agent app` (default the superuser's own database)."""
    login = login or "-U postgres postgres"
    code, out = sh(container, f"pgbench -n -c {clients} -j 2 -T {seconds} {extra} -h {host} {login}",
                   timeout=seconds + 60, env={"PGPASSWORD": "apw"} if "agent" in login else None)
    assert code == 0, out
    m = re.search(r"tps = ([\d.]+)", out)
    assert m, out
    return float(m.group(1))


AUDITED_PG = ["postgres", *db_audit.SERVER_ARGS]
AUDITED_SETUP = db_audit.setup_sql("postgres", "postgres", "apw") + db_audit.SLOT_SQL


def alternating(rounds: int, *runs) -> list[float]:
    """Medians of each of `runs` run in turn, `rounds` times each."""
    results: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for run, out in zip(runs, results):
            out.append(run())
    return [statistics.median(out) for out in results]


def audited_pgbench(lab: Lab, bench, server, seconds: int, clients: int, extra: str, decoded: list[int]) -> float:
    """pgbench as `agent` against the logical-decoding server while the audit's reader drains its
    slot as a sandbox does; the rows of the events it recorded are added to `decoded`."""
    rows = [0]
    done = threading.Event()

    def record(kind: str, details: dict, ts) -> None:
        rows[0] += details.get("row_count") or 0

    async def drain() -> None:
        driver = DockerDriver(max_workers=4)
        reader = db_audit.DbAuditReader(driver, server.id, "db", "postgres", "postgres", record)
        reader.start()
        while not done.is_set():
            await asyncio.sleep(0.05)
        await reader.stop()  # what a sandbox does at the agent's end: read what is left
        await driver.close()

    thread = threading.Thread(target=asyncio.run, args=(drain(),))
    thread.start()
    try:
        tps = pgbench(lab, bench, "db-audited", seconds, clients, extra, login="-U agent postgres")
    finally:
        done.set()
        thread.join()
    decoded.append(rows[0])
    return tps


async def drain_once(server) -> None:
    driver = DockerDriver(max_workers=2)
    try:
        await db_audit.DbAuditReader(driver, server.id, "db", "postgres", "postgres", lambda *_: None).poll()
    finally:
        await driver.close()


def http_rps(container, host: str, port: int, url: str, seconds: int, clients: int) -> float:
    code, out = sh(container, f"python3 - {host} {port} '{url}' {seconds} {clients} <<'EOF'\n{HTTP_CLIENT}\nEOF",
                   timeout=seconds + 60)
    assert code == 0, out
    return float(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env()
    lab = Lab(client, "svc-bench")
    try:
        net = lab.network("inner")
        lab.start(PG, network=net, aliases=["db-direct"], environment={"POSTGRES_PASSWORD": "pw"})
        audited = lab.start(PG, AUDITED_PG, network=net, aliases=["db-audited"], environment={"POSTGRES_PASSWORD": "pw"})
        lab.start(PY, ["python3", "-u", "/svc-programs/http_mock.py"], network=net, aliases=["mock"],
                  environment={"SVC_MOCK_CONFIG": json.dumps(MOCK)},
                  volumes={str(PROGRAMS): {"bind": "/svc-programs", "mode": "ro"}})
        _, http_audit = lab.proxy("egress", {"services": ["mock"], "http_calls": True}, network=net, aliases=["proxy"])
        agent = lab.start(PY, ["sleep", "infinity"], network=net)
        bench = lab.start(PG, ["sleep", "infinity"], network=net, environment={"PGPASSWORD": "pw"})
        for host, port in (("mock", 80), ("proxy", 3128)):
            wait_port(agent, host, port)
        code, out = sh(bench, "for i in $(seq 1 120); do pg_isready -q -h db-direct && break; sleep 0.5; done; "
                              f"pgbench -i -q -s {args.clients} -h db-direct -U postgres postgres", timeout=300)
        assert code == 0, out
        code, out = sh(audited, "for i in $(seq 1 120); do pg_isready -q -h db-audited && break; sleep 0.5; done; "
                                f"psql -X -q -v ON_ERROR_STOP=1 -U postgres postgres <<'EOF'\n{AUDITED_SETUP}\nEOF", timeout=300)
        assert code == 0, out
        code, out = sh(bench, f"pgbench -i -q -s {args.clients} -h db-audited -U agent postgres", timeout=300,
                       env={"PGPASSWORD": "apw"})
        assert code == 0, out
        asyncio.run(drain_once(audited))  # the initial load's changes, before any measurement
        s, c, r = args.seconds, args.clients, args.rounds
        print(f"[bench] {c} clients, {s}s per measurement, medians of {r} alternating runs; load average "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        for label, extra in (("tpc-b (read/write)", ""), ("select-only (-S)", "-S")):
            decoded: list[int] = []
            direct, inside = alternating(r, lambda: pgbench(lab, bench, "db-direct", s, c, extra),
                                         lambda: audited_pgbench(lab, bench, audited, s, c, extra, decoded))
            print(f"db audit in the server {label:20s}   direct {direct:9.1f} tps   wal_level=logical + agent role "
                  f"+ slot drained every {db_audit.POLL_S:g}s {inside:9.1f} tps   ratio {inside / direct:.2f}   "
                  f"(rows audited {sum(decoded)})",
                  flush=True)
        direct, proxied = alternating(r, lambda: http_rps(agent, "mock", 80, "/hello", s, c),
                                      lambda: http_rps(agent, "proxy", 3128, "http://mock/hello", s, c))
        print(f"egress proxy http keep-alive      direct {direct:9.1f} rps   proxied {proxied:9.1f} rps   "
              f"ratio {proxied / direct:.2f}", flush=True)
        n_http = sum(1 for _ in http_audit.open()) if http_audit.exists() else 0
        print(f"[bench] audit lines written: http {n_http}; load average {os.getloadavg()[0]:.1f}")
    finally:
        lab.close()


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"[bench] done in {time.monotonic() - t0:.0f}s")
