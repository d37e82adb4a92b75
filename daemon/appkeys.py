"""Typed application state (aiohttp AppKey) shared by the API layer and the services.

Kept apart from daemon/http.py because services may not import the API layer; http.py re-exports.
Each key names the type of what is stored under it, so `app[STORE]` is a Store to a type checker. Keys
whose type's module reads the app itself are declared beside that type: WEBHOOKS in daemon/webhooks,
RUNS in daemon/api/runs.py, ROUTE_INFOS in daemon/http.py.
"""
from __future__ import annotations

import asyncio

from aiohttp import web

from daemon.config import Settings
from daemon.events import EventBus
from daemon.ratelimit import TokenBuckets
from daemon.runner.request import ScenarioRunner
from daemon.sandbox.manager import SandboxManager
from daemon.store.db import Store
from daemon.traces.writer import TraceWriter

STORE = web.AppKey("store", Store)
SETTINGS = web.AppKey("settings", Settings)
EVENTS = web.AppKey("events", EventBus)
RATE_LIMITER = web.AppKey("rate_limiter", TokenBuckets)
# One lock per idempotency key being served, so two requests with the same key run one at a time.
IDEMPOTENCY_LOCKS = web.AppKey("idempotency_locks", dict[str, asyncio.Lock])
DEFAULT_TENANT_ID = web.AppKey("default_tenant_id", str)
SANDBOXES = web.AppKey("sandboxes", SandboxManager)
TRACE_WRITER = web.AppKey("trace_writer", TraceWriter)
TRACE_DB = web.AppKey("trace_db", Store)  # a read connection of its own (daemon.store.traces.open_reader)
URL_SIGNING_KEY = web.AppKey("url_signing_key", bytes)
# The experiment scheduler's seam: tests and benchmarks put their own ScenarioRunner here before
# startup; unset, daemon.runner.scenario.run_scenario runs.
RUN_SCENARIO = web.AppKey("experiments.run_scenario", ScenarioRunner)
