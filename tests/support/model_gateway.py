"""The model gateway program (daemon/sandbox/programs/model_gateway.py) run as a host subprocess,
as its container runs it: a JSON config file named by SVC_GATEWAY_CONFIG_FILE, stdout and stderr
kept in a log file, the record file read back as parsed lines.

    with GatewayProcess(tmp_path, providers={"openai": {"base_url": llm.openai_url, "key": KEY}},
                        allow_private=True) as gw:
        OpenAI(base_url=gw.openai_url, api_key=gw.token) ...
        gw.records()   # every call line so far
        gw.log()       # what the program printed"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Self

PROGRAM = Path(__file__).resolve().parents[2] / "daemon" / "sandbox" / "programs" / "model_gateway.py"


class GatewayProcess:
    def __init__(self, workdir: Path, providers: dict[str, dict[str, Any]], token: str = "svc-gw-test-token",
                 name: str = "gateway", env: dict[str, str] | None = None, **config: Any) -> None:
        """`env`: added to the program's environment (SSL_CERT_FILE names the trust store it uses)."""
        self.dir = Path(workdir)
        self.env = env or {}
        self.dir.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.config_file = self.dir / f"{name}.json"
        self.record_file = self.dir / f"{name}-calls.jsonl"
        self.log_file = self.dir / f"{name}.log"
        self.config = {"listen": "127.0.0.1:0", "token": token, "providers": providers, "mode": "live",
                       "replay_file": None, "record_file": str(self.record_file), "budget": {}, "pricing": {},
                       "allow_private": False, "host_addresses": [], **config}
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    @property
    def openai_url(self) -> str:
        return self.url + "/openai"

    @property
    def anthropic_url(self) -> str:
        return self.url + "/anthropic"

    def start(self) -> Self:
        self.config_file.write_text(json.dumps(self.config))
        with open(self.log_file, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, str(PROGRAM)], stdout=log, stderr=subprocess.STDOUT,
                                         env={**os.environ, **self.env,
                                              "SVC_GATEWAY_CONFIG_FILE": str(self.config_file)})
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = re.search(r"listening on ([\d.]+):(\d+)", self.log())
            if m:
                self.url = f"http://{m.group(1)}:{m.group(2)}"
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited ({self.proc.returncode}): {self.log()}")
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"the gateway did not start: {self.log()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def records(self) -> list[dict[str, Any]]:
        if not self.record_file.exists():
            return []
        lines = [json.loads(line) for line in self.record_file.read_text().splitlines() if line.strip()]
        return [line for line in lines if not line.get("open")]  # a call's admission line, before its record

    def record(self, seq: int) -> dict[str, Any]:
        """The line of call `seq` (waits a moment: a line is written once its call completed)."""
        deadline = time.monotonic() + 5
        while True:
            found = [r for r in self.records() if r["seq"] == seq]
            if found or time.monotonic() > deadline:
                assert found, f"no record line for call #{seq}: {self.records()}"
                return found[0]
            time.sleep(0.01)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
