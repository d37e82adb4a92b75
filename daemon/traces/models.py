"""Trace API models: they are part of the API contract (daemon/contract/traces.py)."""
from daemon.contract.traces import *  # noqa: F401,F403
from daemon.contract.traces import EVENT_TYPES, MAX_EVENTS_PER_REQUEST, PHASES, TEXT_LIMIT_BYTES  # noqa: F401
