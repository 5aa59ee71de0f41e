"""URLs without their secrets: shown in logs and messages (``redact_url``), or split from
the token they carry (``split_token``); imports nothing else."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def redact_url(url: str) -> str:
    """``url`` with its user and password each shown as ``***`` (an empty one stays empty)
    and any query as ``?…``: ``https://TOKEN@host`` is how a token is often given."""
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
    user, colon, _password = userinfo.partition(":")
    masked = ("***" if user else "") + (":***" if colon else "")
    netloc = f"{masked}@{hostport}" if at else hostport
    query = "?…" if parts.query else ""
    slashes = "//" if url[len(scheme) :].startswith("//") else ""
    return f"{scheme}{slashes}{netloc}{parts.path}{query}"


def split_token(url: str) -> tuple[str, str | None]:
    """``url`` without its ``token`` query parameter, and that token (``None`` if empty): the
    URL ``dsh web`` prints (``http://127.0.0.1:PORT/?token=…``) carries the launch token."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if all(key != "token" for key, _ in query):
        return url, None
    token = next((value for key, value in query if key == "token" and value), None)
    rest = urlencode([(key, value) for key, value in query if key != "token"])
    return urlunsplit(parts._replace(query=rest)), token
