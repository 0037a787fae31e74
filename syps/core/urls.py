"""A URL's password kept out of what syps prints or logs: a PostgreSQL store's connection
string (``SYPS_STORE``) and an MLflow tracking URI (``MLFLOW_TRACKING_URI``) may carry one."""

from __future__ import annotations

import urllib.parse


def redact(url: str) -> str:
    """``url`` with its password (in the authority or a ``password=`` query field) as ``***``."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if parts.password is None and not any(k.lower() == "password" for k, _ in query):
        return url  # as it is: a rebuilt URL may differ (sqlite:///x loses a slash)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    hidden = [(k, "***" if k.lower() == "password" else v) for k, v in query]
    return urllib.parse.urlunsplit(
        parts._replace(netloc=netloc, query=urllib.parse.urlencode(hidden, safe="*"))
    )


def secrets_of(url: str) -> list[str]:
    """The password in ``url``, raw and percent-decoded (what a driver's message might quote)."""
    parts = urllib.parse.urlsplit(url)
    found = [parts.password or ""]
    found += [v for k, v in urllib.parse.parse_qsl(parts.query) if k.lower() == "password"]
    raw = parts.netloc.rpartition("@")[0].partition(":")[2]
    return [s for s in {*found, raw, urllib.parse.unquote(raw)} if s]
