"""The model gateway's pure parts: stream cutting and key redaction, pricing, the request hash,
path refusals, budgets and the replay divergence detail (the program itself, with the real SDKs,
is driven in test_model_gateway.py)."""
from __future__ import annotations

import pytest

from daemon.sandbox.programs.model_gateway import (
    REDACTED,
    Budget,
    ConfigError,
    Cutter,
    Gateway,
    cost_of,
    json_diff,
    path_refusal,
    price_for,
    request_hash,
)

KEY = b"sk-real-0123456789abcdef"


def test_a_key_split_across_two_reads_is_redacted():
    cut = Cutter([KEY])
    out = cut.feed(b'data: {"x": "Bearer sk-real-0123') + cut.feed(b'456789abcdef"}\n\n') + cut.flush()
    assert out == b'data: {"x": "Bearer ' + REDACTED.encode() + b'"}\n\n'


def test_a_piece_never_ends_inside_a_utf8_character():
    cut = Cutter([])
    data = "✓ ok".encode()
    pieces = [cut.feed(data[:2]), cut.feed(data[2:]), cut.flush()]
    assert [p.decode() for p in pieces] == ["", "✓ ok", ""]


TABLE = {"gpt-4o": [2.5, 10.0], "gpt-4o-mini": [0.15, 0.6], "gpt-4": [30.0, 60.0], "o1": [15.0, 60.0, 7.5]}


@pytest.mark.parametrize("model,price", [
    ("gpt-4o", ([2.5, 10.0], "exact")),
    ("gpt-4o-mini-2024-07-18", ([0.15, 0.6], "exact")),
    ("openai/gpt-4o-2024-08-06", ([2.5, 10.0], "exact")),
    ("gpt-4o-mini-tts", ([30.0, 60.0, 30.0], "highest_known")),  # no prefix matching
    ("o1-pro", ([30.0, 60.0, 30.0], "highest_known")),  # never priced as its cheaper sibling o1
    ("gpt-4.5-preview", ([30.0, 60.0, 30.0], "highest_known")),
    ("llama-3", ([30.0, 60.0, 30.0], "highest_known")),
    (None, ([30.0, 60.0, 30.0], "highest_known")),
])
def test_a_model_is_priced_by_its_exact_name_else_at_the_highest_known_price(model, price):
    assert price_for(TABLE, model) == price


def test_an_explicit_alias_prices_a_model_as_another():
    assert price_for(TABLE, "GPT-4o-Mini-Preview-2024-07-18", {"gpt-4o-mini-preview": "gpt-4o-mini"}) == \
        ([0.15, 0.6], "alias")


def test_unknown_tokens_have_no_cost():
    assert cost_of({"m": [1.0, 2.0]}, "m", {"input_tokens": None, "output_tokens": None}) == (None, None)


def test_the_request_hash_ignores_key_order():
    assert request_hash("openai", "POST", "/chat/completions", {"a": 1, "b": [1, {"c": 2, "d": 3}]}) == \
        request_hash("openai", "POST", "/chat/completions", {"b": [1, {"d": 3, "c": 2}], "a": 1})


@pytest.mark.parametrize("target", ["/openai/chat/completions", "/anthropic/v1/messages?beta=true",
                                    "/openai/files/abc/content", "/openai/models?q=a@b"])
def test_ordinary_paths_are_allowed(target):
    assert path_refusal(target) is None


@pytest.mark.parametrize("target", ["/openai/../x", "/openai/%2E%2E/x", "/openai/a%2f..%2fb", "/openai//x",
                                    "/openai/@x", "/openai/a%5cb", "/openai/./x", "/openai/a%00b", "/openai/x#y"])
def test_paths_leaving_the_base_are_refused(target):
    assert path_refusal(target) is not None


def test_max_tokens_refuses_once_reached():
    budget = Budget({"max_tokens": 100})
    budget.calls = 2
    budget.add({"input_tokens": 80, "output_tokens": 20}, None)
    assert budget.refusal() == {"reason": "budget_exceeded", "limit": "max_tokens", "value": 100,
                                "spent": {"calls": 2, "tokens": 100, "cost_usd": 0.0},
                                "message": "svc budget exceeded: max_tokens 100 reached (100 tokens used)"}


@pytest.mark.parametrize("a,b,detail", [
    ({"model": "gpt-4o", "messages": []}, {"model": "gpt-4o-mini", "messages": []}, "model differs: gpt-4o vs gpt-4o-mini"),
    ({"messages": [{"content": "x"}] * 3 + [{"content": "long " * 20}]},
     {"messages": [{"content": "x"}] * 3 + [{"content": "other " * 20}]}, "messages[3].content differs"),
    ({"messages": [1, 2, 3]}, {"messages": [1, 2]}, "messages has 3 items vs 2 recorded"),
    ({"model": "m", "tools": []}, {"model": "m"}, "tools is not in the recorded request"),
    ({"model": "m"}, {"model": "m", "tools": []}, "tools is missing (the recorded request has it)"),
    ({"model": "m"}, {"model": "m"}, None),
])
def test_the_divergence_detail_names_the_first_difference(a, b, detail):
    assert json_diff(a, b) == detail


@pytest.mark.parametrize("cfg,message", [
    ({"providers": {}}, "token: missing"),
    ({"token": "t", "providers": {"openai": {"base_url": "ftp://x", "key": "k"}}},
     "providers.openai.base_url: the scheme must be http or https"),
    ({"token": "t", "providers": {"openai": {"base_url": "https://u:p@x/v1", "key": "k"}}},
     "providers.openai.base_url: must not carry credentials, a query or a fragment"),
    ({"token": "t", "providers": {"gemini": {"key": "k"}}}, "providers.gemini: unknown provider"),
    ({"token": "t", "providers": {"openai": {}}}, "providers.openai.key: missing"),
    ({"token": "t", "providers": {}, "budget": {"max_calls": -1}}, "budget.max_calls: must be a non-negative number"),
    ({"token": "t", "providers": {}, "mode": "replay"}, "replay_file: required in replay mode"),
])
def test_a_bad_configuration_names_the_field(cfg, message):
    with pytest.raises(ConfigError) as err:
        Gateway(cfg)
    assert str(err.value).startswith(message)
