"""Agent snapshots API: multipart upload, digests, versions, tags, traversal rejected, limits."""
from __future__ import annotations

import hashlib
import io
import json
import tarfile

import aiohttp
import pytest

from tests.support.api import make_settings


def make_bundle(files: dict[str, bytes] | None = None, *, extra=None) -> bytes:
    """A .tar.gz of `files`; `extra(tar)` may add odd members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for name, data in (files if files is not None else {"agent.py": b"print('hi')\n"}).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
        if extra:
            extra(tar)
    return buf.getvalue()


def form(metadata: dict, bundle: bytes | None) -> aiohttp.FormData:
    data = aiohttp.FormData()
    data.add_field("metadata", json.dumps(metadata), content_type="application/json")
    if bundle is not None:
        data.add_field("bundle", bundle, filename="bundle.tar.gz", content_type="application/gzip")
    return data


async def upload(api, name="coder", bundle=None, **meta):
    metadata = {"name": name, "entrypoint": ["python", "agent.py"], **meta}
    return await api.post("/v1/agents", data=form(metadata, make_bundle() if bundle is None else bundle))


async def test_upload_is_content_addressed_and_versioned(api, settings):
    bundle = make_bundle()
    response, first = await upload(api, bundle=bundle, runtime="python3.11")
    assert response.status == 201, first
    digest = hashlib.sha256(bundle).hexdigest()
    assert first["digest"] == f"sha256:{digest}"
    assert first["version"] == 1 and first["size_bytes"] == len(bundle)
    assert first["id"].startswith("snap_") and len(first["id"]) == 5 + 24
    assert first["entrypoint"] == ["python", "agent.py"] and first["runtime"] == "python3.11"
    assert first["tags"] == ["latest"]
    assert (settings.blobs_dir / digest).read_bytes() == bundle
    assert first["storage_path"] == str(settings.blobs_dir / digest)

    response, second = await upload(api, bundle=bundle)
    assert response.status == 201
    assert second["digest"] == first["digest"] and second["version"] == 2
    assert second["id"] != first["id"]  # one id per version row
    assert len(list(settings.blobs_dir.iterdir())) == 1  # stored once

    response, latest = await api.get("/v1/agents/coder/latest")
    assert latest["id"] == second["id"]
    response, v1 = await api.get("/v1/agents/coder/versions/1")
    assert v1["id"] == first["id"] and v1["tags"] == []
    response, by_id = await api.get(f"/v1/snapshots/{first['id']}")
    assert by_id["version"] == 1
    response, versions = await api.get("/v1/agents/coder/versions")
    assert [v["version"] for v in versions["items"]] == [2, 1] and versions["count"] == 2


async def test_entrypoint_string_is_split_and_tags_move(api):
    response, tagged = await api.post(
        "/v1/agents", data=form({"name": "coder", "entrypoint": "python agent.py --fast", "tag": "stable"}, make_bundle())
    )
    assert response.status == 201 and tagged["entrypoint"] == ["python", "agent.py", "--fast"]
    assert tagged["tag"] == "stable" and tagged["tags"] == ["latest", "stable"]
    response, newer = await upload(api, bundle=make_bundle({"agent.py": b"print(2)\n"}))
    assert newer["tags"] == ["latest"]
    response, stable = await api.get("/v1/agents/coder/tags/stable")
    assert stable["id"] == tagged["id"] and stable["tags"] == ["stable"]
    response, moved = await upload(api, bundle=make_bundle({"agent.py": b"print(3)\n"}), tag="stable")
    response, stable = await api.get("/v1/agents/coder/tags/stable")
    assert stable["id"] == moved["id"]
    response, body = await api.get("/v1/agents/coder/tags/nope")
    assert response.status == 404 and body["error"] == "not_found"


async def test_list_agents_paginates_latest_per_name(api):
    for name in ("a1", "a2", "a3"):
        await upload(api, name=name)
    await upload(api, name="a1")
    response, page = await api.get("/v1/agents", params={"limit": "2"})
    assert response.status == 200 and page["count"] == 2 and page["next_cursor"]
    response, rest = await api.get("/v1/agents", params={"limit": "2", "cursor": page["next_cursor"]})
    names = [s["name"] for s in page["items"] + rest["items"]]
    assert sorted(names) == ["a1", "a2", "a3"]
    a1 = next(s for s in page["items"] + rest["items"] if s["name"] == "a1")
    assert a1["version"] == 2


@pytest.mark.parametrize(
    "member, add",
    [
        ("/etc/passwd", lambda tar: _file(tar, "/etc/passwd")),
        ("../evil.py", lambda tar: _file(tar, "../evil.py")),
        ("lib/../../evil.py", lambda tar: _file(tar, "lib/../../evil.py")),
        ("escape", lambda tar: _link(tar, "escape", "../../etc/passwd", tarfile.SYMTYPE)),
        ("abs", lambda tar: _link(tar, "abs", "/etc/passwd", tarfile.SYMTYPE)),
        ("hard", lambda tar: _link(tar, "hard", "../outside", tarfile.LNKTYPE)),
    ],
)
async def test_traversal_members_are_rejected_by_name(api, settings, member, add):
    response, body = await upload(api, bundle=make_bundle({"agent.py": b"x"}, extra=add))
    assert response.status == 400, body
    assert body["error"] == "invalid_request"
    assert member in body["message"]
    assert body["details"]["errors"][0]["member"] == member
    assert not settings.blobs_dir.exists() or [p for p in settings.blobs_dir.iterdir() if not p.name.startswith(".")] == []


async def test_links_inside_the_bundle_are_fine(api):
    def add(tar):
        _link(tar, "lib/current", "../agent.py", tarfile.SYMTYPE)
        _link(tar, "copy.py", "agent.py", tarfile.LNKTYPE)

    response, body = await upload(api, bundle=make_bundle({"agent.py": b"x", "lib/x.py": b"y"}, extra=add))
    assert response.status == 201, body


def _file(tar, name):
    info = tarfile.TarInfo(name)
    info.size = 1
    tar.addfile(info, io.BytesIO(b"x"))


def _link(tar, name, target, kind):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    tar.addfile(info)


async def test_bad_uploads(api):
    response, body = await upload(api, bundle=b"definitely not gzip")
    assert response.status == 400 and "not a valid .tar.gz" in body["message"]
    response, body = await api.post("/v1/agents", data=form({"name": "x"}, make_bundle()))
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "metadata.entrypoint"
    response, body = await api.post("/v1/agents", data=form({"name": "../x", "entrypoint": ["a"]}, make_bundle()))
    assert response.status == 400 and body["details"]["errors"][0]["loc"] == "metadata.name"
    response, body = await api.post("/v1/agents", data=form({"name": "x", "entrypoint": ["a"]}, None))
    assert response.status == 400 and "bundle" in body["message"]
    response, body = await api.post("/v1/agents", json={"name": "x"})
    assert response.status == 415


async def test_delete_frees_the_blob_only_when_unreferenced(api, settings):
    bundle = make_bundle()
    digest = hashlib.sha256(bundle).hexdigest()
    _, first = await upload(api, bundle=bundle)
    _, second = await upload(api, bundle=bundle)
    response, _ = await api.delete(f"/v1/snapshots/{second['id']}")
    assert response.status == 204
    assert (settings.blobs_dir / digest).exists()  # version 1 still uses it
    response, latest = await api.get("/v1/agents/coder/latest")
    assert latest["id"] == first["id"]  # latest fell back to the newest remaining version
    response, _ = await api.delete(f"/v1/snapshots/{first['id']}")
    assert response.status == 204
    assert not (settings.blobs_dir / digest).exists()
    response, body = await api.get(f"/v1/snapshots/{first['id']}")
    assert response.status == 404
    response, body = await api.get("/v1/agents/coder/latest")
    assert response.status == 404


async def test_other_tenants_cannot_read_or_delete(api, other_tenant_key):
    _, snap = await upload(api)
    response, body = await api.get(f"/v1/snapshots/{snap['id']}", key=other_tenant_key)
    assert response.status == 403 and body["error"] == "forbidden"
    response, body = await api.delete(f"/v1/snapshots/{snap['id']}", key=other_tenant_key)
    assert response.status == 403
    response, body = await api.get("/v1/agents/coder/latest", key=other_tenant_key)
    assert response.status == 404  # names are per tenant
    response, listing = await api.get("/v1/agents", key=other_tenant_key)
    assert listing["items"] == []


async def test_version_limit_is_configurable(api, monkeypatch):
    monkeypatch.setenv("SERVICE_MAX_AGENT_VERSIONS", "2")
    await upload(api)
    await upload(api)
    response, body = await upload(api)
    assert response.status == 409 and body["error"] == "conflict"
    assert "limit 2" in body["message"] and body["details"]["state"] == "version_limit"


def raw_multipart(metadata: dict, bundle: bytes, boundary: str = "svc-test-boundary") -> tuple[bytes, dict]:
    body = (
        f"--{boundary}\r\nContent-Disposition: form-data; name=\"metadata\"\r\nContent-Type: application/json\r\n\r\n".encode()
        + json.dumps(metadata).encode()
        + f"\r\n--{boundary}\r\nContent-Disposition: form-data; name=\"bundle\"; filename=\"b.tar.gz\"\r\n"
        f"Content-Type: application/gzip\r\n\r\n".encode()
        + bundle
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


async def test_idempotent_upload_replays_without_a_new_version(api):
    body, headers = raw_multipart({"name": "coder", "entrypoint": ["python", "agent.py"]}, make_bundle())
    headers["Idempotency-Key"] = "0b5b6a8e-upload-1"
    response, first = await api.post("/v1/agents", data=body, headers=headers)
    assert response.status == 201, first
    response, again = await api.post("/v1/agents", data=body, headers=headers)
    assert response.status == 201 and again == first
    assert response.headers.get("Idempotent-Replayed") == "true"
    response, versions = await api.get("/v1/agents/coder/versions")
    assert versions["count"] == 1


@pytest.fixture
def small_settings(tmp_path):
    return make_settings(tmp_path / "home", max_upload_bytes=4096)


async def test_size_limit_is_413(aiohttp_client, small_settings):
    from client.config import read_env_file
    from daemon.app import create_app
    from tests.support.api import Api

    client = await aiohttp_client(create_app(small_settings))
    api = Api(client, read_env_file(small_settings.credentials_path)["SERVICE_API_KEY"])
    import os

    big = make_bundle({"blob.bin": os.urandom(10_000)})
    response, body = await upload(api, bundle=big)
    assert response.status == 413 and body["error"] == "payload_too_large"
    assert body["details"]["limit_bytes"] == 4096
    response, ok = await upload(api)
    assert response.status == 201
