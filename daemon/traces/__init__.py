"""Traces: ingest (JSON events and OTLP), storage (a batched writer), queries and pricing."""
