"""The built-in pricing table: name normalisation, longest-prefix matching, cost arithmetic."""
from __future__ import annotations

import json

import pytest

from daemon.traces import pricing


@pytest.mark.parametrize("model,key", [
    ("gpt-4o", "gpt-4o"),
    ("gpt-4o-2024-08-06", "gpt-4o"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("GPT-4o-Mini", "gpt-4o-mini"),
    ("openai/gpt-4.1", "gpt-4.1"),
    ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ("o3-mini", "o3-mini"),
    ("o3-2025-04-16", "o3"),
    ("o1-preview", "o1"),
    ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet"),
    ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
    ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("claude-opus-4-20250514", "claude-opus-4"),
    ("claude-opus-4-1-20250805", "claude-opus-4"),
    ("claude-opus-4-5-20251101", "claude-opus-4-5"),
    ("anthropic/claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
    ("anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet"),
    ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
    ("gemini-2.5-pro", "gemini-2.5-pro"),
])
def test_known_models_match_the_longest_prefix(model, key):
    found = pricing.lookup(model)
    assert found is not None and found[0] == key


@pytest.mark.parametrize("model", ["gpt-4.5-preview", "gpt-4oo", "llama-3-70b", "o", "", None, "claude", "my-gpt-4o"])
def test_unknown_models_are_unpriced(model):
    assert pricing.lookup(model) is None
    assert pricing.estimate(model, 1000, 1000) == (None, False)


def test_cost_arithmetic_with_cached_tokens():
    # gpt-4o: 2.50 in, 10.00 out, 1.25 cached per 1M
    assert pricing.estimate("gpt-4o", 1_000_000, 0) == (2.5, True)
    assert pricing.estimate("gpt-4o", 0, 1_000_000) == (10.0, True)
    assert pricing.estimate("gpt-4o", 1_000_000, 100_000, 400_000) == (600_000 * 2.5e-6 + 400_000 * 1.25e-6 + 1.0, True)
    # cached tokens beyond the input count are capped; missing counts are zero
    assert pricing.estimate("gpt-4o", 100, None, 1000) == (100 * 1.25e-6, True)
    assert pricing.estimate("claude-sonnet-4", None, None) == (None, False)  # no token counts: unknown, not free
    # no cached price: cached tokens cost the input price
    assert pricing.estimate("gpt-4", 1000, 0, 1000) == (0.03, True)


def test_every_table_entry_is_sane():
    for key, price in pricing.PRICES.items():
        assert key == pricing.normalise(key), key
        assert price.input >= 0 and price.output >= 0
        assert price.cached is None or price.cached <= price.input


def test_overrides_from_a_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"my-local-llm": {"input": 1, "output": 2}, "gpt-4o": {"input": 3, "output": 4, "cached": 0.5}}))
    saved = dict(pricing.PRICES)
    try:
        assert pricing.load_overrides(str(path)) == 2
        assert pricing.estimate("my-local-llm-v2", 1_000_000, 1_000_000) == (3.0, True)
        assert pricing.estimate("gpt-4o-2024-08-06", 1_000_000, 0) == (3.0, True)
        path.write_text(json.dumps({"x": {"input": 1}}))
        with pytest.raises(ValueError):
            pricing.load_overrides(str(path))
    finally:
        pricing.PRICES.clear()
        pricing.PRICES.update(saved)
        pricing.lookup.cache_clear()
