"""Tools for replaying outside attacks: raw HTTP over a socket, and log capture.

``raw_request`` writes bytes exactly as given (so headers can carry bytes an HTTP client
library would refuse to send) and reads the status line and body of the answer.
"""

from __future__ import annotations

import asyncio
import logging
from urllib.parse import urlsplit

__all__ = ["LogTap", "raw_request", "request_bytes"]


def request_bytes(
    method: str, path: str, host: str, headers: dict[str, bytes | str], body: bytes = b""
) -> bytes:
    """An HTTP/1.1 request, ``Connection: close``, with header values sent byte for byte."""
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: " + host.encode()]
    for name, value in headers.items():
        raw = value if isinstance(value, bytes) else value.encode("latin-1")
        lines.append(name.encode() + b": " + raw)
    lines.append(f"Content-Length: {len(body)}".encode())
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


async def raw_request(
    url: str,
    method: str,
    path: str,
    headers: dict[str, bytes | str] | None = None,
    body: bytes = b"",
    *,
    host: str | None = None,
) -> tuple[int, bytes]:
    """Send one request to the server at ``url``; returns (status, body)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        host_header = host if host is not None else parts.netloc
        writer.write(request_bytes(method, path, host_header, headers or {}, body))
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, rest = answer.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), rest


class LogTap(logging.Handler):
    """Keeps every record logged anywhere while installed (``with LogTap() as tap:``)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def __enter__(self) -> LogTap:
        root = logging.getLogger()
        self._level = root.level
        root.addHandler(self)
        root.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        root = logging.getLogger()
        root.removeHandler(self)
        root.setLevel(self._level)

    @property
    def tracebacks(self) -> list[logging.LogRecord]:
        """Records that carry an exception (a traceback in the output)."""
        return [r for r in self.records if r.exc_info or r.exc_text]

    @property
    def errors(self) -> list[logging.LogRecord]:
        """Records at ERROR or above."""
        return [r for r in self.records if r.levelno >= logging.ERROR]

    def refusals(self, cause: str) -> list[logging.LogRecord]:
        """Refusal records naming ``cause``."""
        return [r for r in self.records if getattr(r, "cause", None) == cause]
