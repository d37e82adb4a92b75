"""What differs between two runs' ledgers. Each effect becomes one keyed quantity (`quantities`):
db rows per service, table and operation; HTTP calls per host, method and path; model calls per
model; the change of each file; how often each command ran. Kinds whose source one run did not
record are left out (`unknown`), never reported as "none"."""
from __future__ import annotations

from typing import Any

from daemon.contract.effects import EffectDifference, EffectKind, EffectsDiff, RunEffects

# kind -> the EffectSources fields that must all be on in both runs to compare it
SOURCES: dict[str, tuple[str, ...]] = {"db": ("db",), "http": ("http",), "model": ("models",),
                                       "file": ("workspace_files", "container_files"), "process": ("processes",)}


def table_name(service: str, table: str, services: set[str]) -> str:
    return table if len(services) <= 1 else f"{service}:{table}"


def quantities(ledger: RunEffects) -> dict[tuple[str, str], Any]:
    """{(kind, key): quantity}: rows (None when unknown) for db, calls for http and models, the
    change for a file, runs for a process."""
    out: dict[tuple[str, str], Any] = {}
    services = {d.service for d in ledger.db}
    for d in ledger.db:
        out[("db", f"db {table_name(d.service, d.table, services)} {d.operation}")] = d.rows if d.rows is not None else "?"
    for h in ledger.http:
        out[("http", f"http {h.method} {h.host}{h.path}")] = h.calls
    for m in ledger.models:
        out[("model", f"model {m.model}")] = m.calls
    for f in ledger.files:
        out[("file", f"file {f.path}")] = f.change
    for p in ledger.processes:
        out[("process", f"process {p.command}")] = p.count
    return out


def compared_kinds(*ledgers: RunEffects) -> tuple[set[str], list[str]]:
    """(kinds every ledger recorded, the others)."""
    known = {kind for kind, fields in SOURCES.items()
             if all(any(getattr(led.sources, f) for f in fields) for led in ledgers)}
    return known, sorted(set(SOURCES) - known)


def times(n: Any) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n}x"


def describe(kind: str, key: str, name: str, value: Any) -> str:
    """What `name` did for one effect, e.g. `A wrote 3 rows to orders (insert)`."""
    what = key.split(" ", 1)[1]
    if kind == "db":
        table, _, op = what.rpartition(" ")
        if value is None:
            return f"{name} did not {'run DDL on' if op == 'ddl' else op + ' rows of'} {table}"
        if op == "ddl":
            return f"{name} changed the schema of {table} ({times(value)})"
        rows = "rows" if value == "?" else ("1 row" if value == 1 else f"{value} rows")
        verb = {"insert": "inserted", "update": "updated", "delete": "deleted"}.get(op, op)
        return f"{name} {verb} {rows} {'into' if op == 'insert' else 'in'} {table}"
    if kind == "http":
        method, _, target = what.partition(" ")
        return f"{name} did not {method} {target}" if value is None else f"{name} {method}ed {target} {times(value)}"
    if kind == "model":
        return f"{name} made no call to {what}" if value is None else f"{name} called {what} {times(value)}"
    if kind == "file":
        return f"{name} left {what} alone" if value is None else f"{name} {value} {what}"
    return f"{name} did not run {what}" if value is None else f"{name} ran {what} {times(value)}"


def message(kind: str, key: str, a: Any, b: Any, names: tuple[str, str] = ("A", "B")) -> str:
    """`B POSTed api.example.test/v1/refunds twice (A once)`: the side that did more first."""
    first, second = (1, 0) if a is None or (b is not None and _bigger(b, a)) else (0, 1)
    values = (a, b)
    return f"{describe(kind, key, names[first], values[first])} ({_short(kind, names[second], values[second])})"


def _bigger(x: Any, y: Any) -> bool:
    return isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > y


def _short(kind: str, name: str, value: Any) -> str:
    if value is None:
        return f"{name} none" if kind != "file" else f"{name} unchanged"
    return f"{name} {value}" if kind in ("db", "file") else f"{name} {times(value)}"


def diff_runs(a: RunEffects, b: RunEffects) -> EffectsDiff:
    known, unknown = compared_kinds(a, b)
    qa, qb = quantities(a), quantities(b)
    differences = []
    for kind, key in sorted(set(qa) | set(qb)):
        if kind not in known:
            continue
        va, vb = qa.get((kind, key)), qb.get((kind, key))
        if va != vb:
            differences.append(EffectDifference(kind=kind_of(kind), key=key, a=va, b=vb, message=message(kind, key, va, vb)))
    return EffectsDiff(a=a.run_id, b=b.run_id, differences=differences, unknown=unknown)


def kind_of(kind: str) -> EffectKind:
    assert kind in SOURCES, kind
    return kind  # type: ignore[return-value]
