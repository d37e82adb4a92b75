"""One route table (daemon/contract/routes.py) for the daemon and every client: no client writes a
/v1 path itself, every table route has exactly one handler, and a route fills its own path."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from daemon.contract import routes as R

ROOT = Path(__file__).resolve().parents[2]
CLIENT_DIRS = ("client", "tui")
# The tracing SDK is copied into agents' sandboxes as a single standard-library-only file
# (svc_tracing.py), where neither the table nor the client exists: it keeps its two ingest paths,
# checked against the table below instead.
STANDALONE = {"client/tracing/sdk.py": (R.INGEST_SANDBOX_TRACE, R.INGEST_TRACES)}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def api_paths_written_in(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line: literal` for each string literal (f-string parts too, docstrings aside) naming a /v1 path."""
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if "/v1/" in node.value or node.value.rstrip("/") == "/v1":
                hits.append(f"{path.relative_to(root)}:{node.lineno}: {node.value[:80]!r}")
    return hits


def test_no_client_writes_an_api_path_outside_the_route_table():
    hits = [hit for folder in CLIENT_DIRS for path in sorted((ROOT / folder).rglob("*.py"))
            if str(path.relative_to(ROOT)) not in STANDALONE for hit in api_paths_written_in(path)]
    assert not hits, ("call the route table instead (client.call(R.NAME, ...), daemon/contract/routes.py):\n"
                      + "\n".join(hits))


def test_the_standalone_tracing_sdk_sends_to_table_routes():
    for name, routes in STANDALONE.items():
        literals = [hit.split(": ", 1)[1].strip("'") for hit in api_paths_written_in(ROOT / name)]
        assert literals, name
        for literal in literals:
            assert any(route.method == "POST" and route.path.startswith(literal) for route in routes), (name, literal)


def test_the_check_finds_a_path_in_an_f_string(tmp_path):
    source = tmp_path / "x.py"
    source.write_text('"""GET /v1/runs is fine in a docstring."""\nasync def f(c, i):\n    return await c.get(f"/v1/runs/{i}")\n')
    assert api_paths_written_in(source, tmp_path) == ["x.py:3: '/v1/runs/'"]


def test_every_table_route_has_exactly_one_handler_and_every_handler_a_table_route():
    import importlib

    from daemon.app import API_MODULES
    from daemon.http import RouteTableError, Routes, check_bindings

    infos = [info for name in API_MODULES for info in importlib.import_module(name).routes.items]
    check_bindings(infos)
    assert {info.route.name for info in infos} == set(R.BY_NAME)
    with pytest.raises(RouteTableError, match="get_run .* has no handler"):
        check_bindings([i for i in infos if i.route is not R.GET_RUN])
    with pytest.raises(RouteTableError, match="get_run .* has 2 handlers"):
        check_bindings(infos + [i for i in infos if i.route is R.GET_RUN])
    adhoc = Routes("test")

    @adhoc.get("/v1/unlisted", "not in the table")
    async def unlisted(request):
        return {}

    with pytest.raises(RouteTableError, match="GET /v1/unlisted .* is not an entry of the route table"):
        check_bindings(infos + adhoc.items)


def test_a_handler_is_checked_against_its_route():
    from daemon.http import RouteTableError, Routes, check_bindings

    with pytest.raises(TypeError, match="GET /v1/runs/{run_id}, bound with routes.post"):
        Routes("runs").post(R.GET_RUN, "wrong method")
    with pytest.raises(TypeError, match="declared in the route table"):
        Routes("runs").get(R.GET_RUN, "a run", response=dict)
    routes = Routes("runs")

    @routes.get(R.GET_RUN, "two arguments")
    async def get_run(request, extra):
        return {}

    with pytest.raises(RouteTableError, match="must take exactly one argument"):
        check_bindings(routes.items, (R.GET_RUN,))


def test_a_route_fills_its_path():
    assert R.GET_RUN.url(run_id="run_1") == "/v1/runs/run_1"
    assert R.READ_SANDBOX_FILE.url(sandbox_id="sbx_1", path="a b/c?.txt") == "/v1/sandboxes/sbx_1/files/a%20b/c%3F.txt"
    assert R.GET_SECRET.url(name="A/B") == "/v1/secrets/A%2FB"
    with pytest.raises(TypeError, match="missing \\['run_id'\\]"):
        R.GET_RUN.url()
    with pytest.raises(TypeError, match="unknown \\['spec_id'\\]"):
        R.GET_RUN.url(run_id="r", spec_id="s")


def test_every_model_reference_resolves():
    for route in R.ALL:
        for ref in (route.body, route.query, route.answer, route.events):
            assert ref is None or R.resolve(ref) is not None, (route.name, ref)
