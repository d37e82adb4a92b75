"""The JSON Schema of spec files, for editors (the YAML language server, VS Code, JetBrains) and
standard validators (`check-jsonschema`).

Generated from :class:`SpecDocument`, so it names every key the loader knows. It checks the shape of
a spec (keys, types, enums, ranges); what only the loader checks (references between blocks, image
references, durations' units) is left to `svc spec validate`. `svc spec schema` prints this document
and the daemon serves the same one at `GET /v1/spec-schema`.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from typing import Any

from .models import SpecDocument

__all__ = ["SCHEMA_DIALECT", "spec_json_schema", "spec_json_schema_text"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    body = SpecDocument.model_json_schema(mode="validation")
    return {
        "$schema": SCHEMA_DIALECT,
        "title": "svc spec",
        "description": ("An svc spec file: the sandbox an agent gets, its task, and what correct means. "
                        "Generated from the daemon's spec models; `svc spec validate` checks the rest "
                        "(references between blocks, image references)."),
        **{k: v for k, v in body.items() if k not in ("title", "description")},
    }


def spec_json_schema() -> dict[str, Any]:
    """The schema as a fresh dict (the caller may change it)."""
    return copy.deepcopy(_schema())


def spec_json_schema_text() -> str:
    """The schema as `svc spec schema` prints it: indented JSON, keys in the models' order, a final newline."""
    return json.dumps(_schema(), indent=2, ensure_ascii=False) + "\n"
