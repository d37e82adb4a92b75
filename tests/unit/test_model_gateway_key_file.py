"""The gateway program's `key_file` (a provider key kept in a file of its own: on a swarm, a Swarm
secret under /run/secrets): read and used as the key; a configuration pointing it anywhere else
(another file of the container, a way out with `..`) is refused without reading, and no error
names the file's content."""
from __future__ import annotations

import pytest

from daemon.sandbox.programs import model_gateway as program
from daemon.sandbox.programs.model_gateway import ConfigError, Provider

KEY = "sk-from-a-secret-0123456789abcdef"


@pytest.fixture
def key_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(program, "KEY_DIR", str(tmp_path))
    return tmp_path


def test_a_key_file_under_the_secrets_directory_is_the_providers_key(key_dir):
    (key_dir / "key-openai").write_text(KEY + "\n")
    provider = Provider("openai", {"base_url": "http://upstream:1/v1", "key_file": f"{key_dir}/key-openai"}, need_key=True)
    assert provider.credential() == ("Authorization", f"Bearer {KEY}")


@pytest.mark.parametrize("where", ["/etc/passwd", "{dir}/../../etc/passwd", "{dir}-other/key", "relative/key"])
def test_a_key_file_anywhere_else_is_refused(key_dir, where):
    with pytest.raises(ConfigError, match="must be a file under"):
        Provider("openai", {"key_file": where.format(dir=key_dir)}, need_key=True)


def test_an_unreadable_key_file_fails_without_its_content(key_dir):
    (key_dir / "big").write_text(KEY * 1000)
    with pytest.raises(ConfigError) as missing:
        Provider("openai", {"key_file": f"{key_dir}/gone"}, need_key=True)
    with pytest.raises(ConfigError) as big:
        Provider("openai", {"key_file": f"{key_dir}/big"}, need_key=True)
    assert ("cannot read it" in str(missing.value), "over" in str(big.value), KEY in str(big.value)) == (True, True, False)


def test_a_key_in_the_configuration_wins_and_no_key_file_is_needed_to_replay(key_dir):
    assert Provider("openai", {"key": "sk-inline-0123456789", "key_file": f"{key_dir}/gone"}, need_key=True).key == \
        "sk-inline-0123456789"
    assert Provider("openai", {}, need_key=False).key == ""
