"""URLs shown without their secrets, for logs and error messages; imports nothing else."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["redact_url"]


def redact_url(url: str) -> str:
    """``url`` with its user and password each shown as ``***`` and any query as ``?…``.

    The user is masked too: ``https://TOKEN@host`` (or ``TOKEN:x-oauth-basic@``) is how a
    token is often given. An empty user stays empty (``redis://:***@host``).
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable URL)"
    scheme = f"{parts.scheme}:" if parts.scheme else ""
    if "@" in url.partition("://")[2] and "@" not in parts.netloc:
        # An unencoded / ? or # in a password ends the host part early: the rest of the
        # password would be shown as path or query, and nothing says where it ends.
        return f"{scheme}//(an @ after its host part: not shown)"
    userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = f"{_masked_userinfo(userinfo)}@{hostport}" if at else hostport
    query = "?…" if parts.query else ""
    slashes = "//" if url[len(scheme) :].startswith("//") else ""
    return f"{scheme}{slashes}{netloc}{parts.path}{query}"


def _masked_userinfo(userinfo: str) -> str:
    """``user:password`` as ``***:***``, each part masked unless empty."""
    user, colon, _password = userinfo.partition(":")
    return ("***" if user else "") + (":***" if colon else "")
