"""The do-nothing agent: it reads its task and exits without touching anything. Every spec should
fail it; one that passes the noop agent checks nothing.

    svc agents upload noop examples/agents/noop --entrypoint "python3 agent.py"
"""
import os

print("noop agent: received", len(os.environ.get("SERVICE_TASK_PROMPT", "")), "characters of task; doing nothing")
