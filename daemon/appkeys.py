"""Typed application state (aiohttp AppKey) shared by the API layer and the services.

Kept apart from daemon/http.py because services may not import the API layer; http.py re-exports.
"""
from __future__ import annotations

from typing import Any

from aiohttp import web

from daemon.runner.request import ScenarioRunner

STORE = web.AppKey("store", Any)
SETTINGS = web.AppKey("settings", Any)
EVENTS = web.AppKey("events", Any)
ROUTE_INFOS = web.AppKey("route_infos", list)
WEBHOOKS = web.AppKey("webhooks", Any)
RATE_LIMITER = web.AppKey("rate_limiter", Any)
IDEMPOTENCY_LOCKS = web.AppKey("idempotency_locks", dict)
DEFAULT_TENANT_ID = web.AppKey("default_tenant_id", str)
SANDBOXES = web.AppKey("sandboxes", Any)
TRACE_WRITER = web.AppKey("trace_writer", Any)
TRACE_DB = web.AppKey("trace_db", Any)
URL_SIGNING_KEY = web.AppKey("url_signing_key", bytes)
RUNS = web.AppKey("runs", Any)
# The experiment scheduler's seam: tests and benchmarks put their own ScenarioRunner here before
# startup; unset, daemon.runner.scenario.run_scenario runs.
RUN_SCENARIO = web.AppKey("experiments.run_scenario", ScenarioRunner)
