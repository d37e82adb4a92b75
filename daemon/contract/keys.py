"""API keys and tenants."""
from __future__ import annotations

from pydantic import Field

from daemon.contract.common import Request, Response


class KeyCreate(Request):
    name: str = Field(min_length=1, max_length=100)


class Key(Response):
    id: str
    name: str
    prefix: str
    created_at: str
    rotated_at: str | None = None


class KeyWithSecret(Key):
    secret: str


class TenantCreate(Request):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.\-]+$")


class TenantCreated(Response):
    id: str
    name: str
    created_at: str
    key: KeyWithSecret
