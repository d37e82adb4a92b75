"""SERVICE_SWARM_* settings: a malformed value is named, never half-read."""
from __future__ import annotations

import pytest

from daemon.sandbox.swarm.settings import SwarmSettingsError, from_env, read_env_file


def test_swarm_env_file_round_trips_into_settings():
    text = ("SERVICE_ENGINE=swarm\nSERVICE_SWARM_MANAGER=tcp://10.0.0.2:2375\n"
            "SERVICE_SWARM_NODES=a=tcp://10.0.0.2:2375,b=tcp://10.0.0.3:2375\n"
            "SERVICE_SWARM_IMAGES=localhost/svc/python:3.11=reg:5000/svc/python@sha256:" + "a" * 64 + "\n")
    assert from_env(read_env_file(text)).nodes == {"a": "tcp://10.0.0.2:2375", "b": "tcp://10.0.0.3:2375"}


def test_missing_manager_is_named():
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_MANAGER"):
        from_env({"SERVICE_SWARM_NODES": "a=tcp://x:2375"})


def test_node_item_without_url_names_its_index():
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_NODES: item 1"):
        from_env({"SERVICE_SWARM_MANAGER": "tcp://x:2375", "SERVICE_SWARM_NODES": "a=tcp://x:2375,b"})


def test_image_by_tag_is_refused():
    with pytest.raises(SwarmSettingsError, match="by digest"):
        from_env({"SERVICE_SWARM_MANAGER": "tcp://x:2375", "SERVICE_SWARM_IMAGES": "localhost/svc/python:3.11=reg:5000/svc/python:3.11"})
