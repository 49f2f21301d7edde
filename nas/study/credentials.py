"""A storage URL's password: where it may come from, and hiding it wherever a URL is stored or shown.

A password reaches the study's database from, in this order (the first that gives one wins):

1. the URL itself: ``postgresql://bob:PASSWORD@host/db`` or a query parameter ``?password=PASSWORD``;
2. ``NAS_STORAGE_PASSWORD``, for a PostgreSQL or MySQL URL that names a user and holds no password;
3. for PostgreSQL, libpq's own sources, read by the driver (psycopg 3) when it is given no password:
   ``PGPASSWORD``, then the password file ``PGPASSFILE`` (default ``~/.pgpass``; lines
   ``hostname:port:database:username:password`` with ``*`` wildcards and ``\\:`` escapes; libpq ignores the
   file, with a warning on stderr, when its group or others may read it).

None of them is part of the study's identity (its name in the database): a search started with the password
in its URL resumes with the URL alone and the password from the environment.

:func:`redact` is the one rule that hides a password wherever a URL is stored or shown: the manifest (its
settings, storage and command line), the report that embeds it, every message that names a storage;
:func:`scrub` applies it, and hides the passwords themselves, in a driver's error message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["MASK", "PASSWORD_ENV", "redact", "redact_all", "scrub", "split_password"]

MASK = "***"
PASSWORD_ENV = "NAS_STORAGE_PASSWORD"

# a URL's scheme, with or without slashes after it (a malformed postgresql:/bob:pw@host is hidden too)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:/*")
# query parameters that hold a secret: password, passwd, pwd (drivers' names), sslpassword, *secret*, *token*
_QUERY_SECRET = re.compile(r"[?&](?:\w*pass(?:word|wd)|pwd|\w*secret\w*|\w*token\w*)=([^&#]*)", re.IGNORECASE)


def _spans(text: str) -> list[tuple[int, int]]:
    """Where the passwords of the URL in ``text`` are: the user part's and the query's secret parameters."""
    scheme = _SCHEME.search(text)
    if scheme is None:
        return []
    start = scheme.end()
    spans = []
    # The user part ends at the last "@", though SQLAlchemy and libpq end it at the first: a password with an
    # unescaped "@" (a connection that then fails, and a message that names the URL) is hidden whole. A
    # stray "@" further on (in a query value) hides more than the password, never less.
    at = text.rfind("@", start)
    colon = text.find(":", start, at) if at != -1 else -1
    if colon != -1:
        spans.append((colon + 1, at))
    tail = at + 1 if at != -1 else start
    spans += [match.span(1) for match in _QUERY_SECRET.finditer(text, tail) if match.group(1)]
    return spans


def redact(url: str) -> str:
    """``url`` with each password shown as ``***``: ``postgresql://bob:***@host/db``, ``...?password=***``.
    The rest is kept as given, and a string that holds no URL with a password (a journal path, a Ray address,
    a flag) is returned unchanged. Text before the URL is kept, so a command-line argument
    ``--storage=URL`` is redacted whole."""
    out = url
    for start, end in reversed(_spans(url)):
        out = out[:start] + MASK + out[end:]
    return out


def redact_all(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with :func:`redact` applied to every string."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_all(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(item) for item in value]
    return value


def _passwords_in(url: str) -> list[str]:
    """The passwords ``url`` holds, as written and decoded, and their pieces between unescaped "@"s (of 4
    characters or more, lest every "a" of a message go): what a driver's message may repeat."""
    found = []
    for start, end in _spans(url):
        written = url[start:end]
        # an unescaped "@" ends the password early for the driver, which may then name the rest as a host
        pieces = written.split("@") if "@" in written else []
        found += [written, unquote(written), *(piece for piece in pieces if len(piece) >= 4)]
    return found


def scrub(message: str, url: str, passwords: Iterable[str] = ()) -> str:
    """A driver's ``message`` about ``url`` safe to show: the URL redacted, and ``url``'s passwords and
    ``passwords`` (one from the environment) hidden wherever else the message repeats them, decoded or
    URL-encoded."""
    message = message.replace(url, redact(url))
    secrets = {*_passwords_in(url), *passwords}
    secrets |= {quote(secret, safe=safe) for secret in secrets for safe in ("", " +")}  # as URLs write them
    for secret in sorted(secrets - {"", MASK}, key=len, reverse=True):
        message = message.replace(secret, MASK)
    return message


def split_password(url: str) -> tuple[str, str | None]:
    """(``url`` without a password, the password its driver is to be given): the URL's own (its user part's,
    or a ``password`` / ``passwd`` query parameter), else ``NAS_STORAGE_PASSWORD`` where the URL names a
    user, else None (libpq then looks for one). The password goes to the driver as a connection argument,
    so the URL Optuna keeps (and formats: a "{" in a password would break it) holds none. Other databases
    than PostgreSQL and MySQL (whose drivers take ``password=``) keep the URL as it is. A malformed URL
    raises SQLAlchemy's ArgumentError."""
    from sqlalchemy.engine import URL, make_url

    parsed = make_url(url)
    if parsed.get_backend_name() not in ("postgresql", "mysql", "mariadb"):
        return url, None
    keys = [key for key in parsed.query if key.lower() in ("password", "passwd")]
    password = parsed.password
    if keys:  # the query's wins, as SQLAlchemy gives the driver both and the query's last
        value = parsed.query[keys[-1]]
        password = value if isinstance(value, str) else value[-1]
    if password is not None:
        bare = URL.create(
            parsed.drivername, parsed.username, None, parsed.host, parsed.port, parsed.database, parsed.query
        ).difference_update_query(keys)  # URL.set(password=None) would keep it
        return bare.render_as_string(hide_password=False), str(password)
    if parsed.username:
        return url, os.environ.get(PASSWORD_ENV) or None
    return url, None
