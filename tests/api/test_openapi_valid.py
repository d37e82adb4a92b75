"""The OpenAPI document a real svcd serves (GET /v1/openapi.json) is a valid OpenAPI 3.1 document
(openapi-spec-validator), names the address the daemon listens on, and is good enough for a code
generator: openapi-python-client generates a client from the raw document, and that client uploads
a spec, runs an experiment (a one-line shell agent in a real sandbox) and reads its results."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from openapi_spec_validator import OpenAPIV31SpecValidator

from tests.support.fuzzing import fuzzed_svcd
from tests.support.specs import hello_yaml

GENERATOR = Path(sys.executable).with_name("openapi-python-client")


@pytest.fixture(scope="module")
def served():
    with fuzzed_svcd() as (base, key, home):
        yield base, key, requests.get(base + "/v1/openapi.json", timeout=10).json()


def test_the_document_is_valid_openapi_3_1(served):
    _, _, document = served
    errors = [f"{'/'.join(map(str, error.path))}: {error.message[:200]}" for error in OpenAPIV31SpecValidator(document).iter_errors()]
    assert errors == []


def test_the_document_names_the_daemons_own_address(served):
    base, _, document = served
    assert document["servers"] == [{"url": base}]


def test_a_generated_client_uploads_a_spec_runs_an_experiment_and_reads_its_results(served, tmp_path):
    base, key, document = served
    path = tmp_path / "openapi.json"
    path.write_text(requests.get(base + "/v1/openapi.json", timeout=10).text)  # the raw document, as served
    (tmp_path / "config.yaml").write_text("post_hooks: []\n")  # no formatter run: the code is imported, not read
    generated = subprocess.run([str(GENERATOR), "generate", "--path", str(path), "--meta", "none", "--output-path",
                                str(tmp_path / "svc_generated"), "--config", str(tmp_path / "config.yaml")],
                               capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"})
    assert generated.returncode == 0, generated.stdout + generated.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        client_module = importlib.import_module("svc_generated.client")
        upload = importlib.import_module("svc_generated.api.specs.post_upload_spec")
        create = importlib.import_module("svc_generated.api.experiments.post_create_experiment")
        run = importlib.import_module("svc_generated.api.experiments.post_run_experiment")
        get = importlib.import_module("svc_generated.api.experiments.get_get_experiment")
        models = importlib.import_module("svc_generated.models")
        client = client_module.AuthenticatedClient(base_url=document["servers"][0]["url"], token=key, raise_on_unexpected_status=True)
        spec = upload.sync(client=client, body=models.SpecUpload(name="generated", yaml=hello_yaml("generated")))
        experiment = create.sync(client=client, body=models.ExperimentCreate(spec_id=spec.id, replicas=1))
        run.sync(experiment.id, client=client, body=models.ExperimentRun())
        deadline = time.monotonic() + 120
        results = get.sync(experiment.id, client=client)
        while results.status in ("created", "running") and time.monotonic() < deadline:
            time.sleep(0.5)
            results = get.sync(experiment.id, client=client)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "svc_generated" or m.startswith("svc_generated.")]:
            del sys.modules[name]
    assert (results.status, [s.verdict for s in results.scenarios]) == ("completed", ["pass"])
