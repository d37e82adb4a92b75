"""A Dockerfile base reads nothing outside its build context: a context that leaves the spec's directory
is refused at upload, the CLI refuses a symbolic link in the context that points outside it, an
uploaded file whose path climbs out is refused, and a build whose Dockerfile copies from `..` finds
nothing there (only the uploaded context exists where the daemon builds). Build args are never
secrets: a name that looks like one is refused unless the spec marks it."""
from __future__ import annotations

import base64

import pytest
import yaml

from client.local_spec import SpecFilesError, upload_body
from tests.support.images import PYTHON
from tests.support.runs import start_run, wait_run


def built_spec(spec_id: str, **build) -> dict:
    return {"version": 1, "id": spec_id, "base": {"build": {"context": "env", **build}}, "task": {"prompt": "p"},
            "agent": {"type": "cli", "binary": "true"},
            "invariants": {"ok": {"check": {"type": "file_exists", "path": "x"}}}}


async def upload(api, doc: dict, files: dict[str, bytes]) -> tuple[int, dict]:
    body = {"name": doc["id"], "yaml": yaml.safe_dump(doc),
            "files": {path: base64.b64encode(data).decode() for path, data in files.items()}}
    response, answer = await api.post("/v1/specs", json=body)
    return response.status, answer


async def test_a_context_that_leaves_the_spec_directory_is_refused(api):
    status, body = await upload(api, built_spec("ctx-up", context="../env"), {"env/Dockerfile": b"FROM x\n"})
    assert (status, body["details"]["errors"][0]["loc"]) == (400, "base.build.context"), body


async def test_an_uploaded_context_file_that_climbs_out_is_refused(api):
    status, body = await upload(api, built_spec("ctx-climb"), {"env/Dockerfile": b"FROM x\n", "env/../../etc/passwd": b"x"})
    assert (status, "leaves the spec's directory" in body["message"]) == (400, True), body


async def test_a_build_arg_that_looks_like_a_secret_is_refused_unless_marked(api):
    files = {"env/Dockerfile": f"FROM {PYTHON}\n".encode()}
    refused, body = await upload(api, built_spec("ctx-arg", args={"GITHUB_TOKEN": "ghp_x"}), files)
    marked, _ = await upload(api, built_spec("ctx-arg", args={"GITHUB_TOKEN": "public", "PY": "3"},
                                             args_not_secret=["GITHUB_TOKEN"]), files)
    assert (refused, "never secrets" in body["message"], marked) == (400, True, 201), body


def test_the_cli_refuses_a_symbolic_link_out_of_the_context(tmp_path):
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "Dockerfile").write_text(f"FROM {PYTHON}\n")
    (tmp_path / "secret.txt").write_text("host secret")
    (tmp_path / "env" / "leak").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(built_spec("ctx-link")))
    with pytest.raises(SpecFilesError, match="symbolic link out of the build context"):
        upload_body(tmp_path / "spec.yaml")


@pytest.mark.asyncio(loop_scope="module")
async def test_a_build_that_copies_from_outside_its_context_finds_nothing(engine_api, tmp_path):
    (tmp_path / "project" / "env").mkdir(parents=True)
    (tmp_path / "project" / "secret.txt").write_text("beside the context")
    (tmp_path / "project" / "env" / "Dockerfile").write_text(f"FROM {PYTHON}\nCOPY ../secret.txt /leaked\n")
    (tmp_path / "project" / "spec.yaml").write_text(yaml.safe_dump(built_spec("ctx-copy-up")))
    response, record = await engine_api.post("/v1/specs", json=upload_body(tmp_path / "project" / "spec.yaml"))
    assert response.status == 201, record
    run = await wait_run(engine_api, (await start_run(engine_api, record["id"]))["id"], timeout=300)
    error = run["error"]["sandbox_error"]
    assert (error["step"], "Dockerfile line 2" in error["message"], [f["path"] for f in record["files"]]) == (
        "image", True, ["env/Dockerfile"]), error
