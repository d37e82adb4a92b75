"""The investigation agent: an LLM tool-calling loop over read-only views of one tenant's data."""
