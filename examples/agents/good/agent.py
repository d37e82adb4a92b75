"""A known-good agent for the quickstart task (examples/quickstart.yaml): it reads the task from
/workspace/.svc/task.json, counts the rows of the named table through the sandbox's Postgres
service, and writes `users: <n>` to report.txt. A spec this agent fails is a broken spec.

    svc agents upload good examples/agents/good --entrypoint "python3 agent.py"
"""
import json
import os
import pathlib
import re
import subprocess

task = json.loads(pathlib.Path(os.environ.get("SERVICE_TASK_FILE", "/workspace/.svc/task.json")).read_text())
table = str(task.get("inputs", {}).get("table", "users"))
if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", table):
    raise SystemExit(f"refusing a strange table name: {table!r}")
url = os.environ["SERVICE_SERVICE_DB_URL"]
count = subprocess.run(
    ["psql", url, "-At", "-c", f'SELECT count(*) FROM "{table}"'], capture_output=True, text=True, check=True
).stdout.strip()
pathlib.Path("report.txt").write_text(f"users: {count}\n")
print(f"counted {count} rows in {table}; wrote report.txt")
