"""Configuration resolution: flag > env > .env/.env.local > credentials file > default."""
from __future__ import annotations

from client.config import resolve


def test_resolution_order(tmp_path, monkeypatch):
    for name in ("SERVICE_API_KEY", "SERVICE_BASE_URL", "SERVICE_SOCKET"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("SERVICE_HOME", str(home))
    (home / "credentials").write_text("SERVICE_API_KEY=from-credentials\n")
    assert resolve(cwd=tmp_path).api_key == "from-credentials"
    (tmp_path / ".env").write_text("SERVICE_API_KEY=from-dotenv\nSERVICE_BASE_URL=http://127.0.0.1:9999\n")
    (tmp_path / ".env.local").write_text("export SERVICE_API_KEY='from-dotenv-local'\n")
    config = resolve(cwd=tmp_path)
    assert config.api_key == "from-dotenv-local" and config.base_url == "http://127.0.0.1:9999"
    monkeypatch.setenv("SERVICE_API_KEY", "from-env")
    assert resolve(cwd=tmp_path).api_key == "from-env"
    assert resolve(api_key="from-flag", cwd=tmp_path).api_key == "from-flag"


def test_default_base_url_is_the_local_socket(tmp_path, monkeypatch):
    for name in ("SERVICE_BASE_URL", "SERVICE_SOCKET", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SERVICE_HOME", str(tmp_path))
    config = resolve(cwd=tmp_path)
    assert config.base_url == f"unix://{tmp_path}/svcd.sock" and config.is_local


def test_bad_base_url_is_rejected(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="must start with"):
        resolve(base_url="ftp://x", cwd=tmp_path)
