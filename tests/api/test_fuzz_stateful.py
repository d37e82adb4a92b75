"""Stateful fuzzing: for each resource a client creates and deletes, schemathesis walks the OpenAPI
links of GET /v1/openapi.json (create -> get -> delete -> get, and every read under the resource)
against a real svcd with every check schemathesis has (as tests/api/test_fuzz_openapi.py), among
them the stateful ones: a created resource can be read (ensure_resource_availability) and a deleted
one, with everything under it, is gone (use_after_free).

One state machine per resource, so each resource's create is where every walk starts. Create
bodies that carry a document validated beyond a JSON Schema (a spec's YAML, an agent's .tar.gz
bundle, a score rule's type-dependent fields) are made valid so the walk gets past the create;
everything else is generated. Bounded: SERVICE_FUZZ_STATEFUL_EXAMPLES walks of a few steps per
resource (about half a minute in all on 2 cores). No shrinking: a replayed walk meets a server whose
state moved on, which hypothesis would report as flaky generation instead of the failure.
"""
from __future__ import annotations

import io
import os
import tarfile
from collections import Counter
from urllib.parse import quote

import pytest
import requests
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import positive_data_acceptance

from daemon.openapi import RESOURCE_LINKS
from tests.support.fuzzing import fuzzed_svcd, positive_data_accepted
from tests.support.specs import tiny_spec

WALKS = int(os.environ.get("SERVICE_FUZZ_STATEFUL_EXAMPLES") or 25)
SPEC_YAML = yaml.safe_dump(tiny_spec("fuzzed"), sort_keys=False)


def _bundle() -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = b"#!/bin/sh\necho ok\n"
        info = tarfile.TarInfo("run.sh")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


BUNDLE = _bundle()


def _valid_document(label: tuple[str, str], body):
    if not isinstance(body, dict):
        return body
    if label == ("POST", "/v1/specs"):
        return {**body, "yaml": SPEC_YAML, "files": None}
    if label == ("POST", "/v1/agents"):
        return {**body, "bundle": BUNDLE}
    if label == ("POST", "/v1/score-rules"):
        keep = {k: v for k, v in body.items() if k in ("name", "eval_id", "threshold", "applies_to")}
        return {**keep, "type": "regex", "pattern": "ok"}
    return body


def _delete_every_secret(base: str, headers: dict[str, str]) -> None:
    listing = requests.get(base + "/v1/secrets", headers=headers, timeout=15).json()
    for item in listing["items"]:
        requests.delete(f"{base}/v1/secrets/{quote(item['name'], safe='')}", headers=headers, timeout=15)


@pytest.fixture(scope="module")
def daemon():
    with fuzzed_svcd() as served:
        yield served


@pytest.mark.parametrize("create_method, create_path, item_path, id_from", RESOURCE_LINKS,
                         ids=[item for _, _, item, _ in RESOURCE_LINKS])
def test_a_resource_is_served_until_deleted(daemon, create_method, create_path, item_path, id_from):
    base, key, _home = daemon
    headers = {"Authorization": f"Bearer {key}"}
    schema = schemathesis.openapi.from_url(base + "/v1/openapi.json", timeout=10)
    operations = {(create_method.upper(), create_path), ("DELETE", item_path)} | {
        ("GET", path) for path, ops in schema.raw_schema["paths"].items() if "get" in ops and path.startswith(item_path)}
    schema.config.update(headers=headers, base_url=base)
    schema = schema.include(lambda ctx: (ctx.operation.method.upper(), ctx.operation.path) in operations)
    has_delete = "delete" in schema.raw_schema["paths"][item_path]

    @schema.hook("map_body")
    def valid_documents(context, body):
        return _valid_document((context.operation.method.upper(), context.operation.path), body)

    seen: Counter[tuple[str, int]] = Counter()

    class Lifecycle(schema.as_state_machine()):
        def setup(self):
            # Secrets are named by the client: a name a previous walk left behind would make the same
            # walk answer differently the next time, which hypothesis cannot replay.
            if item_path == "/v1/secrets/{name}":
                _delete_every_secret(base, headers)

        def get_call_kwargs(self, case):
            return {"base_url": base, "headers": headers, "timeout": 15}

        def after_call(self, response, case):
            super().after_call(response, case)
            seen[(case.operation.method.upper(), response.status_code)] += 1

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, excluded_checks=[positive_data_acceptance], additional_checks=[positive_data_accepted],
                                   transport_kwargs=kwargs, recorder=self.recorder)

    Lifecycle.run(settings=settings(max_examples=WALKS, stateful_step_count=6, deadline=None, derandomize=True,
                                    database=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate]))
    # The walks got through a whole life: read after create, and (where it can be) deleted.
    assert seen[("GET", 200)] and (seen[("DELETE", 204)] or not has_delete), dict(seen)
