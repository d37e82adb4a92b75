"""The typed contract of the svc HTTP API: pure pydantic models for every request, response and
stream event, one module per resource. Nothing here imports aiohttp, docker or the daemon: the
route wrapper (daemon/http.py) parses requests into these models and validates every answer
against them, and the OpenAPI document (daemon/openapi.py) is generated from them.

Request models forbid extra keys (`additionalProperties: false`); response models forbid extra
keys too, so a handler returning a key its model does not declare fails instead of drifting.
"""
