"""ssh:// engines: one `ssh -N -L` tunnel per engine from a private Unix socket here to the node's
/var/run/docker.sock, so the engine client speaks to `unix://` that socket.

The tunnel is the `ssh` binary with the settings' ssh_config (`SERVICE_SWARM_SSH_CONFIG`: keys,
known hosts, user, port; without it the user's own ssh configuration applies) and `BatchMode=yes`:
it never prompts, so an unknown host key, a refused key or an unreachable host ends it in seconds
with ssh's own message, which the error names. A tunnel that died (its node restarted) is started
again, on the same socket path, by the next call that needs the engine.
"""
from __future__ import annotations

import atexit
import hashlib
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

CONNECT_TIMEOUT_S = 5
START_TIMEOUT_S = 15.0
REMOTE_SOCKET = "/var/run/docker.sock"


class TunnelError(Exception):
    """The tunnel to an ssh:// engine could not be set up (the message has ssh's reason)."""


class SshTunnel:
    def __init__(self, url: str, config: str, directory: Path):
        parsed = urlparse(url)
        if not parsed.hostname:
            raise TunnelError(f"{url[:80]}: no host")
        self.url, self.config = url, config
        self.target = f"{parsed.username}@{parsed.hostname}" if parsed.username else parsed.hostname
        self.port = parsed.port
        self.socket = directory / (hashlib.sha256(url.encode()).hexdigest()[:16] + ".sock")
        self.log = directory / (self.socket.stem + ".log")
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()

    def argv(self) -> list[str]:
        argv = ["ssh"]
        if self.config:
            argv += ["-F", self.config]
        argv += ["-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}", "-o", "ExitOnForwardFailure=yes",
                 "-o", "StreamLocalBindUnlink=yes", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2",
                 "-N", "-L", f"{self.socket}:{REMOTE_SOCKET}"]
        if self.port:
            argv += ["-p", str(self.port)]
        return [*argv, "--", self.target]

    def ensure(self) -> str:
        """The tunnel's `unix://` URL, starting (or restarting) ssh when it is not running."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            return f"unix://{self.socket}"

    def _start(self) -> None:
        self.socket.unlink(missing_ok=True)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                         start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TunnelError(f"ssh to {self.url} failed: {self._reason()}")
            if self.socket.exists():
                return
            time.sleep(0.05)
        self._stop()
        raise TunnelError(f"ssh to {self.url} did not open its tunnel within {START_TIMEOUT_S:g}s: {self._reason()}")

    def _reason(self) -> str:
        try:
            lines = [line for line in self.log.read_text(errors="replace").splitlines() if line.strip()]
        except OSError:
            lines = []
        return lines[-1][:300] if lines else f"exit code {self.proc.returncode if self.proc else '?'}"

    def close(self) -> None:
        with self.lock:
            self._stop()

    def _stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.socket.unlink(missing_ok=True)


class Tunnels:
    """The tunnels of one driver, in a private (0700) directory removed when they close."""

    def __init__(self, config: str):
        self.config = config
        self.directory = Path(tempfile.mkdtemp(prefix="svc-ssh-"))
        self.tunnels: dict[str, SshTunnel] = {}
        self.lock = threading.Lock()
        atexit.register(self.close)

    def url_for(self, url: str) -> str:
        with self.lock:
            tunnel = self.tunnels.get(url)
            if tunnel is None:
                tunnel = self.tunnels[url] = SshTunnel(url, self.config, self.directory)
        return tunnel.ensure()

    def close(self) -> None:
        with self.lock:
            for tunnel in self.tunnels.values():
                tunnel.close()
            self.tunnels.clear()
        shutil.rmtree(self.directory, ignore_errors=True)
