"""Direct store fixtures for API tests."""
from __future__ import annotations
from daemon.appkeys import DEFAULT_TENANT_ID, STORE


async def add_sandbox(api, sandbox_id: str, tenant_id: str | None = None) -> None:
    """A sandboxes row owned by `tenant_id` (default tenant), filling whatever NOT NULL columns the
    sandboxes table has without depending on its owner's module."""
    app = getattr(api, "app", api)  # an Api or the app itself
    store = app[STORE]
    tenant_id = tenant_id or app[DEFAULT_TENANT_ID]
    columns = await store.fetchall("PRAGMA table_info(sandboxes)")
    if not columns:
        await store.execute("CREATE TABLE sandboxes (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL)")
        columns = await store.fetchall("PRAGMA table_info(sandboxes)")
    values = {"id": sandbox_id, "tenant_id": tenant_id}
    for col in columns:
        name, kind, notnull, default, pk = col["name"], (col["type"] or "").upper(), col["notnull"], col["dflt_value"], col["pk"]
        if name in values or not notnull or default is not None or (pk and "INT" in kind):
            continue
        values[name] = 0 if "INT" in kind or "REAL" in kind else "x"
    names = list(values)
    await store.execute(
        f"INSERT INTO sandboxes ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})", [values[n] for n in names]
    )


async def add_experiment(api, experiment_id: str, tenant_id: str | None = None) -> None:
    """An experiments row (never run) owned by `tenant_id` (default tenant): trace events may name it."""
    from daemon.store import experiments
    from daemon.util import now_iso

    app = getattr(api, "app", api)
    await experiments.insert(app[STORE], experiment_id=experiment_id, tenant_id=tenant_id or app[DEFAULT_TENANT_ID], name=experiment_id,
                             spec_record={"id": "demo", "version": 1}, replicas=1, concurrency=None, matrix=[{}], inputs=None,
                             base_seed="seed", filter_failing_from=None, secret_names=[], total_runs=1, now=now_iso())
