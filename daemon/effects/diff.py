"""What differs between two runs' ledgers. Each effect becomes one keyed quantity (`quantities`):
db rows per service, table and operation; HTTP calls per host, method and path; model calls per
model; the change of each file; how often each command ran. Kinds whose source one run did not
record are left out (`unknown`), never reported as "none"."""
from __future__ import annotations

from typing import Any

from daemon.contract.effects import DbEffect, EffectDifference, EffectKind, EffectsDiff, RunEffects

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


def key_text(effect: DbEffect) -> str | None:
    """`id=3,4` (`(k, name)=(1, a),(2, b)` for a key of several columns; `,…` when more rows changed
    than are listed); None when the table has no primary key or no key was read."""
    if not effect.key_columns or not effect.keys:
        return None
    columns = effect.key_columns[0] if len(effect.key_columns) == 1 else "(" + ", ".join(effect.key_columns) + ")"
    return f"{columns}={','.join(effect.keys)}{',…' if effect.keys_more else ''}"


def keys_of(ledger: RunEffects) -> dict[tuple[str, str], str]:
    """{(kind, key): key_text} of the ledger's db effects that carry keys (keys as in `quantities`)."""
    services = {d.service for d in ledger.db}
    out = {}
    for d in ledger.db:
        text = key_text(d)
        if text is not None:
            out[("db", f"db {table_name(d.service, d.table, services)} {d.operation}")] = text
    return out


def compared_kinds(*ledgers: RunEffects) -> tuple[set[str], list[str]]:
    """(kinds every ledger recorded, the others)."""
    known = {kind for kind, fields in SOURCES.items()
             if all(any(getattr(led.sources, f) for f in fields) for led in ledgers)}
    return known, sorted(set(SOURCES) - known)


def times(n: Any) -> str:
    return "once" if n == 1 else "twice" if n == 2 else f"{n}x"


def describe(kind: str, key: str, name: str, value: Any, keys: str | None = None) -> str:
    """What `name` did for one effect, e.g. `A inserted 3 rows into orders` (`, id=3,4,5` with `keys`)."""
    what = key.split(" ", 1)[1]
    if kind == "db":
        table, _, op = what.rpartition(" ")
        if value is None:
            return f"{name} did not {'run DDL on' if op == 'ddl' else op + ' rows of'} {table}"
        if op == "ddl":
            return f"{name} changed the schema of {table} ({times(value)})"
        rows = "rows" if value == "?" else ("1 row" if value == 1 else f"{value} rows")
        verb = {"insert": "inserted", "update": "updated", "delete": "deleted"}.get(op, op)
        return f"{name} {verb} {rows} {'into' if op == 'insert' else 'in'} {table}" + (f", {keys}" if keys else "")
    if kind == "http":
        method, _, target = what.partition(" ")
        return f"{name} did not {method} {target}" if value is None else f"{name} {method}ed {target} {times(value)}"
    if kind == "model":
        return f"{name} made no call to {what}" if value is None else f"{name} called {what} {times(value)}"
    if kind == "file":
        return f"{name} left {what} alone" if value is None else f"{name} {value} {what}"
    return f"{name} did not run {what}" if value is None else f"{name} ran {what} {times(value)}"


def message(kind: str, key: str, a: Any, b: Any, names: tuple[str, str] = ("A", "B"),
            keys: tuple[str | None, str | None] = (None, None)) -> str:
    """`B POSTed api.example.test/v1/refunds twice (A once)`: the side that did more first; a db
    write names the keys of the rows each side changed (`B inserted 2 rows into orders, id=3,4 (A none)`)."""
    first, second = (1, 0) if a is None or (b is not None and _bigger(b, a)) else (0, 1)
    values = (a, b)
    other = _short(kind, names[second], values[second])
    if keys[second] and values[second] is not None:
        other += f": {keys[second]}"
    return f"{describe(kind, key, names[first], values[first], keys[first])} ({other})"


def _bigger(x: Any, y: Any) -> bool:
    return isinstance(x, (int, float)) and isinstance(y, (int, float)) and x > y


def _short(kind: str, name: str, value: Any) -> str:
    if value is None:
        return f"{name} none" if kind != "file" else f"{name} unchanged"
    return f"{name} {value}" if kind in ("db", "file") else f"{name} {times(value)}"


def diff_runs(a: RunEffects, b: RunEffects) -> EffectsDiff:
    known, unknown = compared_kinds(a, b)
    qa, qb = quantities(a), quantities(b)
    ka, kb = keys_of(a), keys_of(b)
    differences = []
    for kind, key in sorted(set(qa) | set(qb)):
        if kind not in known:
            continue
        va, vb = qa.get((kind, key)), qb.get((kind, key))
        keys = (ka.get((kind, key)), kb.get((kind, key)))
        if va != vb:
            differences.append(EffectDifference(kind=kind_of(kind), key=key, a=va, b=vb, a_keys=keys[0], b_keys=keys[1],
                                                message=message(kind, key, va, vb, keys=keys)))
    return EffectsDiff(a=a.run_id, b=b.run_id, differences=differences, unknown=unknown)


def kind_of(kind: str) -> EffectKind:
    assert kind in SOURCES, kind
    return kind  # type: ignore[return-value]
