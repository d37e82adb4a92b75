"""Stock image names, taken from the product so a rename cannot leave the tests behind."""
from __future__ import annotations

from daemon.sandbox.services import POSTGRES_IMAGE, PYTHON_IMAGE, REDIS_IMAGE

PYTHON = PYTHON_IMAGE
POSTGRES = POSTGRES_IMAGE
REDIS = REDIS_IMAGE

__all__ = ["PYTHON", "POSTGRES", "REDIS"]
