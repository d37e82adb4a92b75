"""Overhead of svc's audit proxies, measured between real containers on one internal network.

    python -m tests.bench.bench_proxies [--seconds 5] [--clients 4] [--rounds 3]    (or: make bench-proxies)

* db proxy: pgbench TPS (TPC-B-like default script at scale = clients, as pgbench's manual
  advises, and select-only `-S`) straight to PostgreSQL vs through `pg_proxy.py` (db_writes audit
  on) with its compiled relay (the stock image's, as sandboxes run it) and, for reference, with
  Python forwarding (`"relay": ""`), printed as ratios to direct (target >= 0.8), plus the added
  latency per round trip (1 client, -S). Direct and proxied runs alternate, `--rounds` times each,
  and the medians are compared: on a shared machine one run of each swings by a third. Then the CPU
  time each process of each proxy container spends per transaction (user and system, from
  /proc/<pid>/stat over a fixed `-t` run): steadier than TPS on a loaded machine, and it shows
  where a proxy's time goes.
* db audit inside the server (measured for the planned replacement of the proxy; sandboxes do not
  use it yet): pgbench TPS straight to a stock PostgreSQL as its superuser vs to one started with
  `wal_level=logical`, connected as a non-superuser role that owns the database, with a
  `test_decoding` slot that a loop inside the server's container drains every 0.2 s into per
  transaction/table/operation counts (`DECODE_SQL`, what the daemon would read as db_write events)
  while pgbench runs. Printed as ratios to direct (target >= 0.8), plus the rows decoded.
* egress proxy: requests/s of keep-alive HTTP clients to an `http_mock` straight vs through
  `egress_proxy.py` (http_calls audit on), printed as a ratio (target >= 0.8).

Prints numbers and asserts nothing. Needs the Docker engine and the stock images."""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import time

import docker

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


# The grouping the daemon would do: one db_write per committed transaction, table and operation
# (w JOIN t, with the commit's timestamp), computed inside the server so row values never leave
# it; the bench only totals it ("rows groups").
DECODE_SQL = r"""
WITH c AS (SELECT lsn, xid, data FROM pg_logical_slot_get_changes('svc_audit', NULL, NULL,
                                                                   'include-timestamp', '1', 'skip-empty-xacts', '1')),
     w AS (SELECT xid, m[1] AS tbl, lower(m[2]) AS op, count(*) AS n, min(lsn) AS first
             FROM c, regexp_match(data, '^table (.+?): (INSERT|UPDATE|DELETE|TRUNCATE):') AS m
            WHERE m IS NOT NULL GROUP BY 1, 2, 3),
     t AS (SELECT xid, substring(data FROM '\(at (.*)\)$') AS ts FROM c WHERE data LIKE 'COMMIT %')
SELECT coalesce(sum(w.n), 0) || ' ' || count(*) FROM w JOIN t USING (xid)
"""
AUDITED_PG = ["postgres", "-c", "wal_level=logical", "-c", "max_replication_slots=4", "-c", "max_wal_senders=4"]
AUDITED_SETUP = """
CREATE ROLE agent LOGIN PASSWORD 'apw' NOSUPERUSER NOREPLICATION NOCREATEROLE NOCREATEDB;
CREATE DATABASE app OWNER agent;
\\c app
ALTER SCHEMA public OWNER TO agent;
SELECT pg_create_logical_replication_slot('svc_audit', 'test_decoding');
"""


def alternating(rounds: int, *runs) -> list[float]:
    """Medians of each of `runs` run in turn, `rounds` times each."""
    results: list[list[float]] = [[] for _ in runs]
    for _ in range(rounds):
        for run, out in zip(runs, results):
            out.append(run())
    return [statistics.median(out) for out in results]


def audited_pgbench(lab: Lab, bench, server, seconds: int, clients: int, extra: str, decoded: list[int]) -> float:
    """pgbench as the non-superuser against the logical-decoding server while its slot is drained;
    the rows decoded are added to `decoded`."""
    script = (f"end=$(($(date +%s) + {seconds + 2})); rows=0; while [ $(date +%s) -lt $end ]; do "
              f"r=$(psql -X -At -U postgres -d app -c \"$DECODE\" | cut -d' ' -f1); rows=$((rows + r)); sleep 0.2; done; "
              "echo $rows")
    drain = server.client.api.exec_create(server.id, ["sh", "-c", script], environment={"DECODE": DECODE_SQL})
    stream = server.client.api.exec_start(drain["Id"], stream=True)
    tps = pgbench(lab, bench, "db-audited", seconds, clients, extra, login="-U agent app")
    out = b"".join(stream).decode().strip().splitlines()
    decoded.append(int(out[-1]) if out and out[-1].isdigit() else 0)
    return tps


def cpu_seconds(container) -> dict[str, tuple[float, float]]:
    """{command: (user s, system s)} summed over the container's processes (host pids)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[float, float]] = {}
    for pid, comm in container.top(ps_args="-eo pid,comm")["Processes"]:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, system = out.get(comm, (0.0, 0.0))
        out[comm] = (user + int(fields[11]) / tick, system + int(fields[12]) / tick)
    return out


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
        lab.start(PG, network=net, aliases=["db-upstream"], environment={"POSTGRES_PASSWORD": "pw"})
        pg = {"listen": "0.0.0.0:5432", "upstream": "db-upstream:5432", "service": "db"}
        relay, db_audit = lab.proxy("pg", pg, network=net, aliases=["db"])
        python, py_audit = lab.proxy("pg", {**pg, "relay": ""}, network=net, aliases=["db-py"])
        audited = lab.start(PG, AUDITED_PG, network=net, aliases=["db-audited"], environment={"POSTGRES_PASSWORD": "pw"})
        lab.start(PY, ["python3", "-u", "/svc-programs/http_mock.py"], network=net, aliases=["mock"],
                  environment={"SVC_MOCK_CONFIG": json.dumps(MOCK)},
                  volumes={str(PROGRAMS): {"bind": "/svc-programs", "mode": "ro"}})
        _, http_audit = lab.proxy("egress", {"services": ["mock"], "http_calls": True}, network=net, aliases=["proxy"])
        agent = lab.start(PY, ["sleep", "infinity"], network=net)
        bench = lab.start(PG, ["sleep", "infinity"], network=net, environment={"PGPASSWORD": "pw"})
        for host, port in (("mock", 80), ("proxy", 3128), ("db", 5432), ("db-py", 5432)):
            wait_port(agent, host, port)
        for name, proxy in (("relay", relay), ("python", python)):
            print(f"[bench] db proxy ({name}): {proxy.logs().decode().strip().splitlines()[0]}", flush=True)
        code, out = sh(bench, "for i in $(seq 1 120); do pg_isready -q -h db-upstream && break; sleep 0.5; done; "
                              f"pgbench -i -q -s {args.clients} -h db-upstream -U postgres postgres", timeout=300)
        assert code == 0, out
        code, out = sh(audited, "for i in $(seq 1 120); do pg_isready -q -h db-audited && break; sleep 0.5; done; "
                                f"psql -X -q -v ON_ERROR_STOP=1 -U postgres postgres <<'EOF'\n{AUDITED_SETUP}\nEOF", timeout=300)
        assert code == 0, out
        code, out = sh(bench, f"pgbench -i -q -s {args.clients} -h db-audited -U agent app", timeout=300,
                       env={"PGPASSWORD": "apw"})
        assert code == 0, out
        code, out = sh(audited, 'psql -X -At -U postgres -d app -c "$DECODE"', env={"DECODE": DECODE_SQL}, timeout=300)
        assert code == 0, out  # the initial load's changes drained before any measurement
        s, c, r = args.seconds, args.clients, args.rounds
        print(f"[bench] {c} clients, {s}s per measurement, medians of {r} alternating runs", flush=True)
        for label, extra in (("tpc-b (read/write)", ""), ("select-only (-S)", "-S")):
            direct, proxied, py = alternating(r, *(lambda host=host: pgbench(lab, bench, host, s, c, extra)
                                                   for host in ("db-upstream", "db", "db-py")))
            print(f"db proxy   {label:20s}   direct {direct:9.1f} tps   relay {proxied:9.1f} tps   "
                  f"ratio {proxied / direct:.2f}   (python forwarding {py:9.1f} tps, ratio {py / direct:.2f})",
                  flush=True)
        for label, extra in (("tpc-b (read/write)", ""), ("select-only (-S)", "-S")):
            decoded: list[int] = []
            direct, inside = alternating(r, lambda: pgbench(lab, bench, "db-upstream", s, c, extra),
                                         lambda: audited_pgbench(lab, bench, audited, s, c, extra, decoded))
            print(f"db audit in the server {label:20s}   direct {direct:9.1f} tps   wal_level=logical + non-superuser "
                  f"+ drained slot {inside:9.1f} tps   ratio {inside / direct:.2f}   (rows decoded {sum(decoded)})",
                  flush=True)
        direct, proxied, py = alternating(r, *(lambda host=host: pgbench(lab, bench, host, s, 1, "-S")
                                               for host in ("db-upstream", "db", "db-py")))
        print(f"db proxy   round trip, 1 client     direct {1e6 / direct:7.1f} us   relay {1e6 / proxied:7.1f} us   "
              f"added {1e6 / proxied - 1e6 / direct:.1f} us per query   (python forwarding added "
              f"{1e6 / py - 1e6 / direct:.1f} us)", flush=True)
        txns = 1500
        for label, extra in (("tpc-b", ""), ("select-only", "-S")):
            for name, host, proxy in (("relay", "db", relay), ("python", "db-py", python)):
                before = cpu_seconds(proxy)
                code, out = sh(bench, f"pgbench -n -c {c} -j 2 -t {txns} {extra} -h {host} -U postgres postgres",
                               timeout=600)
                assert code == 0, out
                after = cpu_seconds(proxy)
                per = "   ".join(f"{comm} user {(u - before.get(comm, (0, 0))[0]) * 1e6 / (txns * c):6.1f} us "
                                 f"sys {(st - before.get(comm, (0, 0))[1]) * 1e6 / (txns * c):6.1f} us"
                                 for comm, (u, st) in sorted(after.items()))
                print(f"db proxy   cpu per txn, {label:11s} {name:6s}   {per}", flush=True)
        direct, proxied = alternating(r, lambda: http_rps(agent, "mock", 80, "/hello", s, c),
                                      lambda: http_rps(agent, "proxy", 3128, "http://mock/hello", s, c))
        print(f"egress proxy http keep-alive      direct {direct:9.1f} rps   proxied {proxied:9.1f} rps   "
              f"ratio {proxied / direct:.2f}", flush=True)
        n_db, n_py, n_http = (sum(1 for _ in path.open()) if path.exists() else 0
                              for path in (db_audit, py_audit, http_audit))
        print(f"[bench] audit lines written: db relay {n_db}, db python {n_py}, http {n_http}")
    finally:
        lab.close()


if __name__ == "__main__":
    t0 = time.monotonic()
    main()
    print(f"[bench] done in {time.monotonic() - t0:.0f}s")
