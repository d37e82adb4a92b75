"""Specs API: shapes A and B, versions, validation errors with lines, ids."""
from __future__ import annotations

from tests.support.specs import SPEC_YAML
from daemon.appkeys import STORE

YAML = {"Content-Type": "application/x-yaml"}


async def test_upload_shape_a_and_b_and_versions(api):
    response, first = await api.post("/v1/specs", json={"name": "hello", "yaml": SPEC_YAML})
    assert response.status == 201
    assert first["id"] == "hello" and first["version"] == 1 and first["yaml"] == SPEC_YAML
    changed = SPEC_YAML.replace("write hello.txt", "write hello.txt now")
    response, second = await api.post("/v1/specs", data=changed, headers=YAML)
    assert response.status == 201 and second["version"] == 2
    response, latest = await api.get("/v1/specs/hello")
    assert latest["version"] == 2 and "now" in latest["yaml"]
    response, old = await api.get("/v1/specs/hello", params={"version": "1"})
    assert old["version"] == 1 and old["yaml"] == SPEC_YAML
    response, versions = await api.get("/v1/specs/hello/versions")
    assert [v["version"] for v in versions["items"]] == [2, 1]
    response, body = await api.get("/v1/specs/hello", params={"version": "9"})
    assert response.status == 404 and "no version 9" in body["message"]


async def test_same_yaml_again_is_a_new_version_with_the_same_digest(api):
    # DECISIONS: every upload of an id makes a new version, identical YAML included (the files
    # uploaded with it may differ); each version carries its sha256.
    response, first = await api.post("/v1/specs", data=SPEC_YAML, headers=YAML)
    response, again = await api.post("/v1/specs", data=SPEC_YAML, headers=YAML)
    assert response.status == 201 and again["version"] == 2 and again["sha256"] == first["sha256"]


async def test_invalid_spec_names_line_and_path(api):
    bad = SPEC_YAML.replace("type: file_exists", "type: comand_exit")
    response, body = await api.post("/v1/specs", json={"name": "bad", "yaml": bad})
    assert response.status == 400 and body["error"] == "invalid_request"
    issue = body["details"]["errors"][0]
    assert issue["loc"] == "invariants.wrote.check.type"
    assert issue["line"] == 12
    assert "comand_exit" in issue["msg"]


async def test_invalid_yaml_syntax_has_a_line(api):
    response, body = await api.post("/v1/specs", data="id: x\n  bad: [unclosed\n", headers=YAML)
    assert response.status == 400
    assert body["details"]["errors"][0]["line"] >= 1


async def test_wrong_content_type_is_415(api):
    response, body = await api.post("/v1/specs", data=SPEC_YAML, headers={"Content-Type": "text/plain"})
    assert response.status == 415 and body["error"] == "unsupported_media_type"


async def test_list_filter_delete_and_path_like_ids(api):
    await api.post("/v1/specs", json={"name": "one", "yaml": SPEC_YAML})
    await api.post("/v1/specs", json={"name": "two", "yaml": SPEC_YAML.replace("id: hello", "id: other")})
    response, listing = await api.get("/v1/specs")
    assert {s["id"] for s in listing["items"]} == {"hello", "other"}
    response, listing = await api.get("/v1/specs", params={"name": "two"})
    assert [s["id"] for s in listing["items"]] == ["other"]
    response, body = await api.get("/v1/specs/..%2F..%2Fetc")  # `..` after URL decoding: 400 invalid_request
    assert response.status == 400 and body["error"] == "invalid_request", body
    response, body = await api.get("/v1/specs/a..b")
    assert response.status == 400
    response, _ = await api.delete("/v1/specs/hello")
    assert response.status == 204
    response, body = await api.get("/v1/specs/hello")
    assert response.status == 404 and body["details"] == {"resource": "spec", "id": "hello"}


# --- fixture files: uploaded with the spec, never read from the daemon's host ------------------------

import base64  # noqa: E402
import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402

import pytest  # noqa: E402

FIXTURE_SPEC = SPEC_YAML.replace("invariants:", """\
services:
  - name: db
    type: postgres
fixtures:
  - {path: FIXTURE}
  - {service: db, path: seed.sql}
invariants:""")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("bad", ["/etc/passwd", "../../../etc/passwd", "data/../../x", "~/.ssh/id_rsa"])
async def test_fixture_paths_outside_the_spec_directory_are_refused_with_their_line(api, bad):
    text = SPEC_YAML.replace("invariants:", f"fixtures:\n  - path: {bad}\ninvariants:")
    for response, body in (await api.post("/v1/specs", json={"name": "evil", "yaml": text}),
                           await api.post("/v1/specs", data=text, headers=YAML)):
        assert response.status == 400 and body["error"] == "invalid_request", body
        issue = body["details"]["errors"][0]
        assert issue["loc"] == "fixtures.0.path" and issue["line"] == 10, issue
        assert bad in issue["msg"] and ("absolute" in issue["msg"] or "leaves the spec's directory" in issue["msg"])
    response, _ = await api.get("/v1/specs/hello")
    assert response.status == 404  # nothing was stored


def test_spec_validate_reports_a_fixture_path_outside_the_spec_directory(tmp_path):
    from client.cli import main

    path = tmp_path / "evil.yaml"
    path.write_text(SPEC_YAML.replace("invariants:", "fixtures:\n  - path: ../../../etc/passwd\ninvariants:"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["spec", "validate", str(path)])
    assert code == 1 and f"{path}:10 fixtures.0.path: fixture path '../../../etc/passwd' leaves" in err.getvalue()


async def test_path_fixtures_must_be_uploaded_with_the_spec(api):
    text = FIXTURE_SPEC.replace("FIXTURE", "data/")
    response, body = await api.post("/v1/specs", data=text, headers=YAML)  # raw YAML cannot carry files
    assert response.status == 400 and body["error"] == "invalid_request", body
    locs = {e["loc"]: e for e in body["details"]["errors"]}
    assert set(locs) == {"fixtures.0.path", "fixtures.1.path"}
    assert locs["fixtures.0.path"]["line"] == 13 and "'data/' was not uploaded" in locs["fixtures.0.path"]["msg"]
    assert "svc specs upload" in locs["fixtures.1.path"]["msg"] and "seed.sql" in locs["fixtures.1.path"]["msg"]
    response, body = await api.post("/v1/specs", json={"name": "x", "yaml": text, "files": {"seed.sql": b64(b"select 1;")}})
    assert response.status == 400 and [e["loc"] for e in body["details"]["errors"]] == ["fixtures.0.path"]


async def test_uploaded_fixture_files_are_stored_as_blobs_per_version(api, settings):
    text = FIXTURE_SPEC.replace("FIXTURE", "./data/")
    files = {"data/a.txt": b64(b"alpha"), "data/sub/run.sh": {"content": b64(b"#!/bin/sh\n"), "mode": 0o755},
             "seed.sql": b64(b"CREATE TABLE t (id int);")}
    response, record = await api.post("/v1/specs", json={"name": "hello", "yaml": text, "files": files})
    assert response.status == 201, record
    assert [f["path"] for f in record["files"]] == ["data/a.txt", "data/sub/run.sh", "seed.sql"]
    for f in record["files"]:
        assert (settings.blobs_dir / f["sha256"]).is_file()
    assert (settings.blobs_dir / next(f["sha256"] for f in record["files"] if f["path"] == "data/a.txt")).read_bytes() == b"alpha"
    # a new version without a directory file: version 1 keeps its own files
    files.pop("data/sub/run.sh")
    response, second = await api.post("/v1/specs", json={"name": "hello", "yaml": text, "files": files})
    assert second["version"] == 2 and len(second["files"]) == 2
    response, first = await api.get("/v1/specs/hello", params={"version": "1"})
    assert len(first["files"]) == 3
    store = api.app[STORE]
    rows = await store.fetchall("SELECT path, mode FROM spec_files WHERE spec_id = 'hello' AND version = 1 ORDER BY path")
    assert [(r["path"], r["mode"]) for r in rows] == [("data/a.txt", 0o644), ("data/sub/run.sh", 0o755), ("seed.sql", 0o644)]
    response, _ = await api.delete("/v1/specs/hello")
    assert await store.fetchall("SELECT 1 FROM spec_files WHERE spec_id = 'hello'") == []


@pytest.mark.parametrize("key,loc_msg", [("../escape.txt", "leaves the spec's directory"), ("/etc/passwd", "absolute"),
                                         ("extra.txt", "not named by any fixture")])
async def test_bad_or_unused_uploaded_files_are_refused(api, key, loc_msg):
    text = FIXTURE_SPEC.replace("FIXTURE", "data")
    files = {"data/a.txt": b64(b"a"), "seed.sql": b64(b"select 1;"), key: b64(b"x")}
    response, body = await api.post("/v1/specs", json={"name": "x", "yaml": text, "files": files})
    assert response.status == 400, body
    assert body["details"]["errors"][0]["loc"] == f"files.{key}" and loc_msg in body["details"]["errors"][0]["msg"]


async def test_uploaded_files_are_size_limited(api, monkeypatch):
    import daemon.api.specs as specs_api

    monkeypatch.setattr(specs_api, "SPEC_FILES_MAX_BYTES", 1000)
    text = FIXTURE_SPEC.replace("FIXTURE", "data")
    files = {"data/a.txt": b64(b"a" * 600), "data/b.txt": b64(b"b" * 600), "seed.sql": b64(b"select 1;")}
    response, body = await api.post("/v1/specs", json={"name": "x", "yaml": text, "files": files})
    assert response.status == 413 and body["error"] == "payload_too_large" and body["details"] == {"limit_bytes": 1000}
    response, body = await api.post("/v1/specs", json={"name": "x", "yaml": text, "files": {**files, "data/a.txt": "%%%"}})
    assert response.status == 400 and body["error"] == "invalid_request", body  # not base64 (and within the limit)


async def test_cli_upload_reads_fixture_files_relative_to_the_spec_and_skips_escaping_links(api, tmp_path):
    from client.cli import main

    proj = tmp_path / "proj"
    (proj / "data" / "sub").mkdir(parents=True)
    (proj / "data" / "a.txt").write_text("alpha")
    (proj / "data" / "sub" / "b.txt").write_text("beta")
    (proj / "data" / "inside").symlink_to(proj / "data" / "a.txt")  # stays inside: uploaded
    (proj / "data" / "passwd").symlink_to("/etc/passwd")  # leaves the directory: skipped
    (proj / "seed.sql").write_text("CREATE TABLE t (id int);")
    spec = proj / "spec.yaml"
    spec.write_text(FIXTURE_SPEC.replace("FIXTURE", "data/"))
    base = str(api.client.make_url("")).rstrip("/")
    out, err = io.StringIO(), io.StringIO()

    def call(*argv: str) -> int:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            return main(["--base-url", base, "--api-key", api.key, *argv])

    import asyncio

    code = await asyncio.to_thread(call, "specs", "upload", str(spec))
    assert code == 0, err.getvalue()
    record = json.loads(out.getvalue())
    assert [f["path"] for f in record["files"]] == ["data/a.txt", "data/inside", "data/sub/b.txt", "seed.sql"]
    assert "with 4 fixture files" in err.getvalue()

    # A fixture that is itself a link out of the spec's directory is refused before anything is sent.
    (proj / "outside").symlink_to("/etc")
    spec.write_text(FIXTURE_SPEC.replace("FIXTURE", "outside"))
    code = await asyncio.to_thread(call, "specs", "upload", str(spec))
    assert code == 1 and "symbolic link out of the spec's directory" in err.getvalue()
