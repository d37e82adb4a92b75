"""Configuration resolution: flag > env > .env/.env.local > config.toml > credentials > default."""
from __future__ import annotations

import pytest

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
    with pytest.raises(ValueError, match="must start with"):
        resolve(base_url="ftp://x", cwd=tmp_path)


# Each setting's sources, strongest first (SPEC "Command-line tool" and DECISIONS "CLI"):
# flag > environment > .env > config.toml > credentials > default.
LEVELS = {
    "api_key": ["flag", "env", ".env", "login credentials", "daemon credentials"],
    "base_url": ["flag", "env", ".env", "config.toml", "default"],
    "timeout": ["flag", "env", ".env", "config.toml", "default"],
}
VALUES = {  # what each source says, per setting
    "api_key": lambda level: f"key-from-{level.replace(' ', '-').replace('.', '')}",
    "base_url": lambda level: {"flag": "http://127.0.0.1:1001", "env": "http://127.0.0.1:1002", ".env": "http://127.0.0.1:1003",
                               "config.toml": "http://127.0.0.1:1004"}.get(level),
    "timeout": lambda level: {"flag": 11.0, "env": 12.0, ".env": 13.0, "config.toml": 14.0, "default": 30.0}[level],
}
ENV_NAMES = {"api_key": "SERVICE_API_KEY", "base_url": "SERVICE_BASE_URL", "timeout": "SERVICE_TIMEOUT"}


def _provide(setting: str, level: str, value, tmp_path, monkeypatch, flags: dict) -> None:
    name = ENV_NAMES[setting]
    if level == "flag":
        flags[setting] = value
    elif level == "env":
        monkeypatch.setenv(name, str(value))
    elif level == ".env":
        with (tmp_path / ".env").open("a") as handle:
            handle.write(f"{name}={value}\n")
    elif level == "config.toml":
        config = tmp_path / "xdg" / "svc" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'{setting} = {value if setting == "timeout" else repr(value).replace(chr(39), chr(34))}\n')
    elif level == "login credentials":
        path = tmp_path / "xdg" / "svc" / "credentials"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SERVICE_API_KEY={value}\n")
    elif level == "daemon credentials":
        (tmp_path / "home" / "credentials").write_text(f"SERVICE_API_KEY={value}\n")



@pytest.mark.parametrize("setting,level", [(s, lvl) for s, levels in LEVELS.items() for lvl in levels])
def test_each_source_beats_every_weaker_one(setting, level, tmp_path, monkeypatch):
    for name in (*ENV_NAMES.values(), "SERVICE_SOCKET", "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("SERVICE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    levels = LEVELS[setting]
    flags: dict = {}
    for weaker in levels[levels.index(level):]:  # this source and every weaker one say something
        if weaker != "default":
            _provide(setting, weaker, VALUES[setting](weaker), tmp_path, monkeypatch, flags)
    config = resolve(cwd=tmp_path, **flags)
    expected = VALUES[setting](level) if level != "default" or setting == "timeout" else f"unix://{tmp_path}/home/svcd.sock"
    assert getattr(config, setting) == expected
