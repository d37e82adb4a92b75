"""The sandbox socket (mounted into agent containers) accepts only sandbox tokens, even when
authentication is disabled for local development."""
from __future__ import annotations

import aiohttp
from aiohttp import web

from client.config import read_env_file
from daemon.app import create_app
from daemon.auth import create_sandbox_token
from daemon.main import start_unix_sites
from tests.support.api import make_settings
from tests.support.homes import short_home
from tests.support.store import add_sandbox
from daemon.appkeys import DEFAULT_TENANT_ID, STORE


async def test_only_sandbox_tokens_pass_the_sandbox_socket():
    home = short_home("svc-sbsock-")
    settings = make_settings(home, auth_disabled=True)
    app = create_app(settings)
    runner = web.AppRunner(app)
    await runner.setup()
    await start_unix_sites(runner, settings)
    try:
        key = read_env_file(settings.credentials_path)["SERVICE_API_KEY"]
        token = await create_sandbox_token(app[STORE], app[DEFAULT_TENANT_ID], "sbx_mine")
        await add_sandbox(app, "sbx_mine")
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(settings.sandbox_socket_path))) as s:
            async with s.get("http://svcd/v1/specs") as r:
                assert r.status == 401, "auth disabled must not open the sandbox socket"
            async with s.get("http://svcd/v1/specs", headers={"Authorization": f"Bearer {key}"}) as r:
                assert r.status == 401, "tenant keys are refused on the sandbox socket"
            async with s.get("http://svcd/v1/specs", headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 403
            async with s.post("http://svcd/v1/sandboxes/sbx_mine/trace", json={"events": []}, headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 202, await r.text()  # its own sandbox's trace endpoint
        async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(settings.socket_path))) as s:
            async with s.get("http://svcd/v1/specs") as r:
                assert r.status == 200, "the client socket still honours SERVICE_AUTH_DISABLED"
        assert oct(settings.socket_path.stat().st_mode & 0o777) == "0o600"
    finally:
        await runner.cleanup()
