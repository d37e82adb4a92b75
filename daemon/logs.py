"""JSON-lines logging to $SERVICE_HOME/logs/svcd.log (and stderr in the foreground)."""
from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

_STANDARD = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(log_path: Path, to_stderr: bool = False, level: int = logging.INFO) -> None:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    root.setLevel(level)
    for handler in list(root.handlers):
        root.removeHandler(handler)
    file_handler = logging.FileHandler(log_path)
    file_handler.setFormatter(JsonFormatter())
    root.addHandler(file_handler)
    if to_stderr:
        stream = logging.StreamHandler(sys.stderr)
        stream.setFormatter(JsonFormatter())
        root.addHandler(stream)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    logging.getLogger("docker").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    throttle_accept_errors()


# When the process runs out of file descriptors (a flood of connections), asyncio's server loop logs
# "socket.accept() out of system resource", with a traceback, every time it retries accepting: a
# tenant holding a thousand streams once filled 3 GB of log in 7 minutes. At most one such line is
# written per ACCEPT_LOG_EVERY_S, carrying how many were left out since the last one.
ACCEPT_LOG_EVERY_S = 30.0
ACCEPT_MARKERS = ("socket.accept()", "_accept_connection", "accept(")


class AcceptErrorThrottle(logging.Filter):
    def __init__(self, every_s: float = ACCEPT_LOG_EVERY_S, clock=time.monotonic):
        super().__init__()
        self.every_s = every_s
        self.clock = clock
        self.last: float | None = None
        self.suppressed = 0
        self.lock = threading.Lock()

    @staticmethod
    def is_accept_error(record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return False
        return any(marker in message for marker in ACCEPT_MARKERS)

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.is_accept_error(record):
            return True
        with self.lock:
            now = self.clock()
            if self.last is not None and now - self.last < self.every_s:
                self.suppressed += 1
                return False
            suppressed, self.suppressed, self.last = self.suppressed, 0, now
        if suppressed:
            record.msg = f"{record.getMessage()} ({suppressed} more accept() failures in the last {self.every_s:g}s not logged)"
            record.args = None
        record.accept_failures_suppressed = suppressed
        return True


def throttle_accept_errors(every_s: float = ACCEPT_LOG_EVERY_S) -> AcceptErrorThrottle:
    """Install (once) the accept-error throttle on asyncio's logger; the installed filter."""
    logger = logging.getLogger("asyncio")
    for existing in logger.filters:
        if isinstance(existing, AcceptErrorThrottle):
            return existing
    throttle = AcceptErrorThrottle(every_s)
    logger.addFilter(throttle)
    return throttle
