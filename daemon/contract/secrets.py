"""The daemon's own secret store: values go in, only names and times come out."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SecretPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: str = Field(min_length=1, max_length=65536)


class SecretInfo(BaseModel):
    name: str
    created_at: str
    updated_at: str
