"""Tenants, API keys and sandbox tokens. Secrets are stored only as sha256 hashes."""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from daemon.store import keys as key_store
from daemon.store.db import Store
from daemon.util import new_id, now_iso, sha256_hex

KEY_PREFIX = "svc_live_"
SANDBOX_TOKEN_PREFIX = "svc_sb_"
DEFAULT_TENANT = "default"


@dataclass(frozen=True)
class Principal:
    kind: str  # "key", "sandbox" or "anonymous" (auth disabled)
    tenant_id: str
    key_id: str | None = None
    sandbox_id: str | None = None
    is_admin: bool = False

    @property
    def rate_key(self) -> str:
        return self.key_id or self.sandbox_id or self.tenant_id

    @property
    def scope(self) -> str:
        """Who sent a request, for what is kept per sender (Idempotency-Key records): an API key
        (rotation keeps its id), a sandbox token, else the tenant (auth disabled)."""
        if self.key_id:
            return "key:" + self.key_id
        if self.sandbox_id:
            return "sandbox:" + self.sandbox_id
        return "tenant:" + self.tenant_id


def new_key_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(24)[:32]


def new_sandbox_token() -> str:
    return SANDBOX_TOKEN_PREFIX + secrets.token_urlsafe(24)[:32]


async def create_tenant(store: Store, name: str, is_admin: bool = False) -> dict:
    tenant = {"id": new_id("ten_"), "name": name, "is_admin": is_admin, "created_at": now_iso()}
    await key_store.insert_tenant(store, tenant_id=tenant["id"], name=name, is_admin=is_admin, created_at=tenant["created_at"])
    return tenant


async def create_key(store: Store, tenant_id: str, name: str) -> tuple[dict, str]:
    secret = new_key_secret()
    key = {"id": new_id("key_"), "tenant_id": tenant_id, "name": name, "prefix": secret[:13], "created_at": now_iso()}
    await key_store.insert_key(store, key_id=key["id"], tenant_id=tenant_id, name=name, prefix=key["prefix"],
                               secret_sha256=sha256_hex(secret), created_at=key["created_at"])
    return key, secret


async def rotate_key(store: Store, key_id: str) -> str:
    secret = new_key_secret()
    await key_store.rotate_key(store, key_id, secret_sha256=sha256_hex(secret), prefix=secret[:13], rotated_at=now_iso())
    return secret


async def create_sandbox_token(store: Store, tenant_id: str, sandbox_id: str) -> str:
    token = new_sandbox_token()
    await key_store.insert_sandbox_token(store, secret_sha256=sha256_hex(token), sandbox_id=sandbox_id, tenant_id=tenant_id,
                                         created_at=now_iso())
    return token


def bearer_token(header: str) -> str | None:
    """The credentials of an `Authorization: Bearer <token>` header, or None. The scheme name is
    case-insensitive (RFC 9110 section 11.1): `bearer`, `BEARER` and `Bearer` are the same."""
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


async def resolve_bearer(store: Store, bearer: str) -> Principal | None:
    if not bearer.isascii() or not bearer.isprintable() or len(bearer) > 512:
        return None  # no key or token looks like that (and a header's raw bytes may not even encode)
    digest = sha256_hex(bearer)
    if bearer.startswith(KEY_PREFIX):
        row = await key_store.key_by_secret(store, digest)
        if row:
            return Principal("key", row["tenant_id"], key_id=row["id"], is_admin=bool(row["is_admin"]))
    elif bearer.startswith(SANDBOX_TOKEN_PREFIX):
        row = await key_store.sandbox_token(store, digest)
        if row:
            return Principal("sandbox", row["tenant_id"], sandbox_id=row["sandbox_id"])
    return None


async def default_tenant_id(store: Store) -> str | None:
    return await key_store.tenant_id_named(store, DEFAULT_TENANT)


async def bootstrap(store: Store, credentials_path: Path) -> str:
    """On first start: the `default` (admin) tenant and one key, written to the credentials file."""
    tenant_id = await default_tenant_id(store)
    if tenant_id is None:
        tenant = await create_tenant(store, DEFAULT_TENANT, is_admin=True)
        tenant_id = tenant["id"]
    if not credentials_path.exists():
        _, secret = await create_key(store, tenant_id, "default")
        write_credentials(credentials_path, secret)
    return tenant_id


def write_credentials(path: Path, secret: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(f"SERVICE_API_KEY={secret}\n")
    os.chmod(path, 0o600)
