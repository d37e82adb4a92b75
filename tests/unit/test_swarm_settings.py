"""SERVICE_SWARM_* settings: a malformed value is named, never half-read; a tcp:// engine only over TLS."""
from __future__ import annotations

import pytest

from daemon.sandbox.engine.swarm.settings import SwarmSettingsError, from_env, read_env_file


@pytest.fixture
def certs(tmp_path):
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("x")
    return str(tmp_path)


def test_swarm_env_file_round_trips_into_settings(certs):
    text = ("SERVICE_ENGINE=swarm\nSERVICE_SWARM_MANAGER=tcp://10.0.0.2:2376\n"
            "SERVICE_SWARM_NODES=a=tcp://10.0.0.2:2376,b=tcp://10.0.0.3:2376\n"
            "SERVICE_SWARM_IMAGES=localhost/svc/python:3.11=reg:5000/svc/python@sha256:" + "a" * 64 + "\n"
            f"SERVICE_SWARM_CERT_PATH={certs}\n")
    assert from_env(read_env_file(text)).nodes == {"a": "tcp://10.0.0.2:2376", "b": "tcp://10.0.0.3:2376"}


def test_missing_manager_is_named():
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_MANAGER"):
        from_env({"SERVICE_SWARM_NODES": "a=ssh://svc@x"})


def test_node_item_without_url_names_its_index():
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_NODES: item 1"):
        from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", "SERVICE_SWARM_NODES": "a=ssh://svc@x,b"})


def test_image_by_tag_is_refused():
    with pytest.raises(SwarmSettingsError, match="by digest"):
        from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", "SERVICE_SWARM_IMAGES": "localhost/svc/python:3.11=reg:5000/svc/python:3.11"})


def test_plain_tcp_node_without_certificates_is_refused_naming_it():
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_NODES: b: .*SERVICE_SWARM_CERT_PATH is not set"):
        from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", "SERVICE_SWARM_NODES": "a=ssh://svc@y,b=tcp://10.0.0.3:2375"})


def test_certificate_directory_missing_a_file_names_it(certs):
    from pathlib import Path

    (Path(certs) / "key.pem").unlink()
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_CERT_PATH: .* has no key.pem"):
        from_env({"SERVICE_SWARM_MANAGER": "tcp://x:2376", "SERVICE_SWARM_CERT_PATH": certs})


def test_tls_engine_is_verified_against_the_ca_with_the_client_certificate(certs):
    settings = from_env({"SERVICE_SWARM_MANAGER": "tcp://x:2376", "SERVICE_SWARM_CERT_PATH": certs})
    tls = settings.client_options(settings.manager)["tls"]
    assert (tls.cert, tls.ca_cert, tls.verify) == ((f"{certs}/cert.pem", f"{certs}/key.pem"), f"{certs}/ca.pem", True)


def test_ssh_engine_is_a_batch_mode_tunnel_with_the_configured_ssh_config(tmp_path):
    from daemon.sandbox.engine.swarm.ssh_tunnel import SshTunnel

    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  IdentitiesOnly yes\n")
    settings = from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x:2222", "SERVICE_SWARM_SSH_CONFIG": str(config)})
    argv = SshTunnel(settings.manager, settings.ssh_config, tmp_path).argv()
    assert (argv[:3], argv[-4:]) == (["ssh", "-F", str(config)], ["-p", "2222", "--", "svc@x"])
    assert "BatchMode=yes" in argv and argv[argv.index("-L") + 1].endswith(".sock:/var/run/docker.sock")


def test_a_missing_ssh_config_is_named():
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_SSH_CONFIG: /nowhere/cfg is not a file"):
        from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", "SERVICE_SWARM_SSH_CONFIG": "/nowhere/cfg"})


def test_daemon_with_a_plain_tcp_swarm_stops_naming_the_setting():
    from daemon.config import Settings
    from daemon.sandbox.engine.select import make_driver

    with pytest.raises(SystemExit, match="^svcd: SERVICE_SWARM_MANAGER: .*SERVICE_SWARM_CERT_PATH is not set"):
        make_driver(Settings(engine="swarm", swarm_manager="tcp://10.0.0.2:2375"))


def test_built_images_go_to_the_registry_of_the_stock_images_unless_one_is_named():
    images = {"SERVICE_SWARM_IMAGES": "localhost/svc/python:3.11=reg.example:5000/svc/python@sha256:" + "a" * 64}
    assert from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", **images}).registry == "reg.example:5000"
    assert from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", "SERVICE_SWARM_REGISTRY": "other:443", **images}).registry == "other:443"
    assert from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x"}).registry == ""


@pytest.mark.parametrize("registry", ["reg:5000/evil", "reg 5000", "https://reg:5000"])
def test_a_registry_that_is_not_host_port_is_refused(registry):
    with pytest.raises(SwarmSettingsError, match="SERVICE_SWARM_REGISTRY"):
        from_env({"SERVICE_SWARM_MANAGER": "ssh://svc@x", "SERVICE_SWARM_REGISTRY": registry})
