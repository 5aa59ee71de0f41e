"""Structured logs, ``key=value`` text or JSON, every record redacted (tokens, bearer secrets,
a URL's credentials). It imports nothing else from the project, so every layer can use it."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any, Final

# After "Bearer ", only what is shaped like a credential (RFC 6750's b64token): 16 or more
# characters, or 6 or more with a digit, so "a valid bearer token is required" stays prose.
_BEARER: Final = (
    r"(?i:bearer)\s+(?:(?=[A-Za-z0-9._~+/=-]*\d)[A-Za-z0-9._~+/=-]{6,}|[A-Za-z0-9._~+/=-]{16,})"
)
_SECRET: Final = re.compile(
    rf"(xox[abprs]-[A-Za-z0-9-]+|xapp-[A-Za-z0-9-]+|{_BEARER}"
    r"|(?<=://)[^/\s:@]*:[^/\s@]+(?=@)|(?<=://)[^/?#\s:@]+(?=@))"
)
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


def redact(text: str) -> str:
    """``text`` with Slack tokens, bearer secrets and URL userinfo replaced by ``[redacted]``."""
    return _SECRET.sub("[redacted]", text)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """``time level logger message key=value ...``."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [f"{stamp}Z", record.levelname, record.name, record.getMessage()]
        parts.extend(f"{key}={value}" for key, value in _fields(record).items())
        if record.exc_info:
            parts.append(self.formatException(record.exc_info))
        return redact(" ".join(str(part) for part in parts))


class JsonFormatter(logging.Formatter):
    """One JSON object per line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": record.created,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return redact(json.dumps(data, default=str, ensure_ascii=False))


def setup_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Send every log line to stderr, formatted and redacted."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("aiohttp.access", "slack_bolt", "slack_sdk"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
