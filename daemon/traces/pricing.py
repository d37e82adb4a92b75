"""Built-in model pricing: USD per 1 million tokens (input, output, cached input).

A model name is matched after normalising it: lower-cased, a provider prefix (`openai/`,
`anthropic/`, `models/`, ...) removed, and a trailing date (`-2024-08-06`, `-20241022`, `@20240620`)
or `-latest` stripped. The longest table key that is a prefix of the name and ends at a boundary
(end of name, `-`, `:`, `@`, `/`) wins, so `gpt-4o-mini-2024-07-18` is `gpt-4o-mini` and
`claude-opus-4-1-20250805` is `claude-opus-4`, while `gpt-4.5-preview` is not `gpt-4`.
A call whose model matches nothing, or whose token counts are unknown (a stream without usage), has
no price: its `estimated_usd` is null (unknown, never 0) and its cost carries `unpriced: true`.

`SERVICE_PRICING_FILE` may name a JSON file `{"model-prefix": {"input": 1.0, "output": 2.0,
"cached": 0.1}, ...}` (USD per 1M tokens) whose entries add to or replace the built-in ones; the
daemon loads it at start (`load_overrides`).

Token accounting: `input_tokens` is every prompt token including cached ones; `cached_tokens` is the
part of it read from the provider's prompt cache, billed at the cached rate.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Price:
    input: float  # USD per 1M input tokens
    output: float  # USD per 1M output tokens
    cached: float | None = None  # USD per 1M cached input tokens; None = same as input


# Public list prices (standard tier) as of 2025.
PRICES: dict[str, Price] = {
    # OpenAI
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.025),
    "gpt-4o": Price(2.50, 10.00, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.075),
    "gpt-4-turbo": Price(10.00, 30.00),
    "gpt-4": Price(30.00, 60.00),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "o1": Price(15.00, 60.00, 7.50),
    "o1-mini": Price(1.10, 4.40, 0.55),
    "o3": Price(2.00, 8.00, 0.50),
    "o3-mini": Price(1.10, 4.40, 0.55),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "text-embedding-3-small": Price(0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.0),
    # Anthropic (cached = cache read)
    "claude-opus-4-5": Price(5.00, 25.00, 0.50),
    "claude-opus-4": Price(15.00, 75.00, 1.50),
    "claude-sonnet-4-5": Price(3.00, 15.00, 0.30),
    "claude-sonnet-4": Price(3.00, 15.00, 0.30),
    "claude-haiku-4-5": Price(1.00, 5.00, 0.10),
    "claude-3-7-sonnet": Price(3.00, 15.00, 0.30),
    "claude-3-5-sonnet": Price(3.00, 15.00, 0.30),
    "claude-3-5-haiku": Price(0.80, 4.00, 0.08),
    "claude-3-opus": Price(15.00, 75.00, 1.50),
    "claude-3-sonnet": Price(3.00, 15.00, 0.30),
    "claude-3-haiku": Price(0.25, 1.25, 0.03),
    # Google
    "gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
    "gemini-1.5-pro": Price(1.25, 5.00, 0.3125),
    "gemini-1.5-flash": Price(0.075, 0.30, 0.01875),
}

# The model gateway (daemon/sandbox/programs/model_gateway.py) prices a call by the exact (normalised)
# name only, never by prefix, so `o1-pro` is not `o1`: these are the names it prices as another entry,
# each checked against the provider's list price. A model in neither table is counted at the highest
# price of the table (`priced_as: highest_known`); an operator adds models with SERVICE_PRICING_FILE.
ALIASES: dict[str, str] = {
    "claude-opus-4-0": "claude-opus-4",
    "claude-opus-4-1": "claude-opus-4",
    "claude-sonnet-4-0": "claude-sonnet-4",
    "o1-preview": "o1",
    "gpt-4-turbo-preview": "gpt-4-turbo",
    "gpt-4-0613": "gpt-4",
    "gpt-3.5-turbo-0125": "gpt-3.5-turbo",
}


def load_overrides(path: str) -> int:
    """Merge a JSON pricing file into the table; returns how many entries it had."""
    import json

    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of model -> {{input, output, cached?}}")
    for model, entry in data.items():
        if not isinstance(entry, dict) or "input" not in entry or "output" not in entry:
            raise ValueError(f"{path}: {model!r} needs input and output prices per 1M tokens")
        cached = entry.get("cached")
        PRICES[normalise(str(model))] = Price(float(entry["input"]), float(entry["output"]), None if cached is None else float(cached))
    lookup.cache_clear()
    return len(data)


_PROVIDER_PREFIX = re.compile(r"^(?:openai|anthropic|google|azure|bedrock|vertex_ai|vertex|models)/")
_DATE_SUFFIX = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8})|-latest)$")
_BOUNDARY = "-:@/"


def normalise(model: str) -> str:
    name = model.strip().lower()
    while True:
        stripped = _PROVIDER_PREFIX.sub("", name)
        if stripped == name:
            break
        name = stripped
    # Bedrock-style ids: "anthropic.claude-3-5-sonnet-20240620-v1:0"
    if name.startswith("anthropic."):
        name = name[len("anthropic."):]
    name = re.sub(r"-v\d+(?::\d+)?$", "", name)
    return _DATE_SUFFIX.sub("", name)


@lru_cache(maxsize=4096)
def lookup(model: str | None) -> tuple[str, Price] | None:
    """(table key, price) for a model name, or None when the model is not priced."""
    if not model:
        return None
    name = normalise(model)
    best = None
    for key in PRICES:
        if name == key or (name.startswith(key) and name[len(key)] in _BOUNDARY):
            if best is None or len(key) > len(best):
                best = key
    return (best, PRICES[best]) if best else None


def estimate(model: str | None, input_tokens: int | None, output_tokens: int | None,
             cached_tokens: int | None = None) -> tuple[float | None, bool]:
    """(estimated USD, priced?) for one call; (None, False) for a model not in the table or when
    neither token count is known. A missing count next to a known one counts 0 (an embedding
    has no output tokens)."""
    found = lookup(model)
    if found is None or (input_tokens is None and output_tokens is None):
        return None, False
    _, price = found
    inp = max(0, input_tokens or 0)
    cached = min(max(0, cached_tokens or 0), inp)
    out = max(0, output_tokens or 0)
    cached_rate = price.input if price.cached is None else price.cached
    usd = ((inp - cached) * price.input + cached * cached_rate + out * price.output) / 1_000_000
    return round(usd, 10), True
