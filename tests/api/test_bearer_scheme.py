"""The HTTP API reads `Authorization: Bearer <key>` with the scheme name in any case (RFC 9110
section 11.1), as the sandbox socket does."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("scheme", ["BEARER", "BeArEr"])
async def test_the_bearer_scheme_is_case_insensitive(api, scheme):
    response = await api.client.get("/v1/traces", headers={"Authorization": f"{scheme} {api.key}"})
    assert response.status == 200, await response.text()
