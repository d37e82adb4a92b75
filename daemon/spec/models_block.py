"""The spec's `models:` block: the providers the sandbox's model gateway forwards to, and the run's
model budget.

    secrets:
      OPENAI_API_KEY: env
    models:
      providers:
        openai:    {key: OPENAI_API_KEY, base_url: https://api.openai.com/v1}   # base_url optional
        anthropic: {key: ANTHROPIC_API_KEY}
      budget: {max_cost_usd: 0.50, max_tokens: 200000, max_calls: 50}          # each optional

`key` names a declared secret: its value goes to the gateway only, never into the agent's
environment (daemon/sandbox/model_gateway.py).
"""
from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from .types import EnvName, SpecModel

PROVIDERS: tuple[str, ...] = ("openai", "anthropic")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}

ProviderName = Literal["openai", "anthropic"]


class ModelProvider(SpecModel):
    key: EnvName = Field(description="the name of a declared secret holding the provider's API key")
    base_url: str | None = Field(default=None, max_length=2000, examples=["https://api.openai.com/v1"],
                                 description="the provider's API root (a vLLM server, a proxy); default: the provider's own")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must be an http:// or https:// URL with a host, got '{value}'")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("base_url takes no user, password, query or fragment (the key goes in `key`)")
        return value.strip().rstrip("/")


class ModelBudget(SpecModel):
    """Per run. The first call made once a limit is reached is refused with the provider's error
    shape, and the run ends `errored` with reason `budget_exceeded`."""

    max_cost_usd: float | None = Field(default=None, gt=0, examples=[0.5])
    max_tokens: int | None = Field(default=None, gt=0, examples=[200000])
    max_calls: int | None = Field(default=None, gt=0, examples=[50])


class Models(SpecModel):
    providers: dict[ProviderName, ModelProvider] = Field(min_length=1)
    budget: ModelBudget = Field(default_factory=ModelBudget)

    def base_url(self, provider: str) -> str:
        return self.providers[provider].base_url or DEFAULT_BASE_URLS[provider]  # type: ignore[index]
