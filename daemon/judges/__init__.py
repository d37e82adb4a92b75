"""LLM judges: one client for every judge call (`client.py`), `evaluate` with its cache, calibration."""
from daemon.judges.client import JudgeConfig, JudgeFailure
from daemon.judges.evaluate import JudgeDefinition, Verdict, evaluate

__all__ = ["JudgeConfig", "JudgeDefinition", "JudgeFailure", "Verdict", "evaluate"]
