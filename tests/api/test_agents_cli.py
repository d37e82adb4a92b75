"""`svc agents ...` through the real CLI against the in-process daemon (over TCP): a directory is
packed reproducibly, uploaded, resolved by tag and version, listed and deleted."""
from __future__ import annotations

import hashlib
import io
import tarfile

from client.commands.agents import pack_directory
from tests.support.cli import svc_json_in_thread


def make_agent_dir(root):
    (root / "lib").mkdir(parents=True)
    (root / "agent.py").write_text("print('hi')\n")
    (root / "lib" / "util.py").write_text("X = 1\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    return root


def test_pack_directory_is_reproducible(tmp_path):
    agent = make_agent_dir(tmp_path / "a")
    first = pack_directory(agent)
    (agent / "agent.py").touch()  # a new mtime changes nothing
    assert pack_directory(agent) == first
    with tarfile.open(fileobj=io.BytesIO(first), mode="r:gz") as tar:
        assert sorted(tar.getnames()) == ["agent.py", "lib", "lib/util.py"]
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())


async def test_upload_list_get_delete(api, tmp_path):
    agent = make_agent_dir(tmp_path / "coder")
    code, snap, err = await svc_json_in_thread(api, "agents", "upload", "coder", str(agent), "--entrypoint", "python3 agent.py --fast",
                                               "--tag", "stable")
    assert code == 0, err
    assert snap["entrypoint"] == ["python3", "agent.py", "--fast"] and snap["tags"] == ["latest", "stable"]
    assert snap["digest"] == "sha256:" + hashlib.sha256(pack_directory(agent)).hexdigest()
    assert "uploaded coder version 1" in err

    code, again, _ = await svc_json_in_thread(api, "agents", "upload", "coder", str(agent), "--entrypoint", "python3 agent.py")
    assert again["version"] == 2 and again["digest"] == snap["digest"]

    bundle = tmp_path / "bundle.tar.gz"
    bundle.write_bytes(pack_directory(agent))
    code, third, _ = await svc_json_in_thread(api, "agents", "upload", "coder", str(bundle), "--entrypoint", "python3 agent.py",
                               "--auth", '{"required_env": ["OPENAI_API_KEY"]}')
    assert third["version"] == 3 and third["auth"]["required_env"] == ["OPENAI_API_KEY"]

    code, stable, _ = await svc_json_in_thread(api, "agents", "get", "coder", "--tag", "stable")
    assert stable["id"] == snap["id"]
    code, v2, _ = await svc_json_in_thread(api, "agents", "get", "coder", "--version", "2")
    assert v2["id"] == again["id"]
    code, latest, _ = await svc_json_in_thread(api, "agents", "get", "coder")
    assert latest["id"] == third["id"]
    code, by_id, _ = await svc_json_in_thread(api, "agents", "get", snap["id"])
    assert by_id["version"] == 1
    code, listing, _ = await svc_json_in_thread(api, "agents", "list")
    assert [a["name"] for a in listing["items"]] == ["coder"]
    code, versions, _ = await svc_json_in_thread(api, "agents", "versions", "coder")
    assert [v["version"] for v in versions["items"]] == [3, 2, 1]
    code, _, err = await svc_json_in_thread(api, "agents", "delete", snap["id"])
    assert code == 0 and "deleted" in err
    code, _, err = await svc_json_in_thread(api, "agents", "get", snap["id"])
    assert code == 1 and "404" in err


async def test_runs_cli_reports_unknown_specs(api):
    code, _, err = await svc_json_in_thread(api, "runs", "create", "--spec", "nope", "--no-local-secrets")
    assert code == 1 and "404 not_found" in err
    code, _, err = await svc_json_in_thread(api, "runs", "create")
    assert code == 1 and "which spec" in err
