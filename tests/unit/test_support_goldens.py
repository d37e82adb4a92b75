"""Golden files are never written silently: a missing golden fails and says how to create it."""
from __future__ import annotations

import pytest

from tests.support.goldens import UPDATE_ENV, assert_golden


def test_a_missing_golden_fails_and_is_not_written(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE_ENV, raising=False)
    golden = tmp_path / "screen_80x24.txt"
    with pytest.raises(AssertionError, match=f"{UPDATE_ENV}=1"):
        assert_golden(golden, "text\n")
    assert not golden.exists()


def test_a_different_golden_fails_with_a_diff(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE_ENV, raising=False)
    golden = tmp_path / "g.txt"
    golden.write_text("old\n")
    with pytest.raises(AssertionError, match=r"(?s)-old.*\+new"):
        assert_golden(golden, "new\n")
    assert golden.read_text() == "old\n"
    assert_golden(golden, "old\n")


def test_goldens_are_written_only_on_purpose(tmp_path, monkeypatch):
    monkeypatch.setenv(UPDATE_ENV, "1")
    golden = tmp_path / "sub" / "g.txt"
    assert_golden(golden, "new\n")
    assert golden.read_text() == "new\n"
