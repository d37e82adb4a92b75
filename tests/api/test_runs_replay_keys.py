"""`svc runs replay RUN` of a run with a model recording asks for no provider key: the model gateway answers
from the recording, so the secrets only it uses (`models.providers.*.key`) are neither resolved by the CLI nor
required by the sandbox's boot. `--models live` still needs them."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from daemon.appkeys import DEFAULT_TENANT_ID, SETTINGS, STORE
from daemon.runner import records
from daemon.sandbox import boot
from daemon.sandbox.boot import BootFailure
from daemon.spec import load_spec
from daemon.traces import gateway
from tests.support.cli import svc_in_thread
from tests.support.specs import RECORDED_SPEC as SPEC



async def recorded_run(api) -> str:
    await api.upload_yaml(SPEC, name="recorded")
    tenant = api.app[DEFAULT_TENANT_ID]
    digest = gateway.recordings(api.app[SETTINGS], tenant).put_bytes(b'{"seq": 1}\n')
    run_id = records.new_run_id()
    store = api.app[STORE]
    await records.insert(store, run_id=run_id, tenant_id=tenant, spec_id="recorded", spec_version=1, seed="s1",
                         status="failed")
    await records.update(store, run_id, models="live", model_recording=digest,
                         pins=json.dumps({"model_recording": digest}))
    return run_id


async def test_a_recorded_replay_starts_without_the_provider_key(api, tmp_path, monkeypatch):
    monkeypatch.delenv("SVC_TEST_PROVIDER_KEY", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env of this checkout
    run_id = await recorded_run(api)
    code, out, err = await svc_in_thread(api, "runs", "replay", run_id)
    assert code == 0, err
    replay = json.loads(out)
    assert replay["replay_of"] == run_id and replay["status"] in ("queued", "running", "errored")
    assert (replay.get("models") or {}).get("mode") == "replayed"

    code, _, err = await svc_in_thread(api, "runs", "replay", run_id, "--models", "live")
    assert code == 1 and "SVC_TEST_PROVIDER_KEY" in err  # live answers need the key, and the CLI says which


class Gateway:
    def __init__(self, recording: str | None):
        self.recording = recording

    async def replay_of(self, sb):
        return self.recording


async def resolve(recording: str | None, provided: dict[str, str] | None = None):
    spec = load_spec(SPEC)
    sb = SimpleNamespace(provided_secrets=provided or {}, tenant_id="t", secrets={}, model_keys={}, metadata={"run_id": "r"})
    ctx = SimpleNamespace(sb=sb, spec=spec, store=None, extensions=[Gateway(recording)], progress=lambda **_: None)
    await boot.resolve_secrets(ctx)
    return sb


async def test_the_boot_of_a_recorded_replay_needs_no_provider_key():
    sb = await resolve("abc123")
    assert sb.secrets == {} and sb.model_keys == {}
    sb = await resolve("abc123", {"SVC_TEST_PROVIDER_KEY": "sk-given"})  # a key sent anyway still goes to the gateway
    assert sb.model_keys == {"SVC_TEST_PROVIDER_KEY": "sk-given"} and sb.secrets == {}
    with pytest.raises(BootFailure, match="SVC_TEST_PROVIDER_KEY"):  # a live run needs it
        await resolve(None)
