"""Where an Optuna study lives.

The study lives in ``runs/<study>/study.db`` (SQLite, write-ahead log) unless ``storage`` names another: any
SQLAlchemy URL (``postgresql://``, ``mysql+pymysql://``, ``sqlite:///``) through Optuna's RDB storage (as
:class:`~nas.study.optuna_private.BatchedRDBStorage`, whose trial writes are one transaction), or a journal
file (``journal:PATH`` or a path ending in ``.log``), so that several workers, in one process group or on
many machines, share one study.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna

from nas.study.credentials import PASSWORD_ENV, redact, scrub, split_password
from nas.study.optuna_private import BatchedRDBStorage
from nas.study.settings import SearchSettings

__all__ = ["open_storage", "storage_file", "storage_url"]


def storage_url(settings: SearchSettings) -> str:
    if settings.storage:
        return settings.storage
    return f"sqlite:///{(settings.run_dir / 'study.db').resolve()}"


def storage_file(url: str) -> Path | None:
    """The local file a SQLite or journal storage keeps (opening it creates it), None for a server's."""
    if url.startswith("journal:") or url.endswith(".log"):
        return Path(url.removeprefix("journal:")).expanduser()
    if url.startswith("sqlite:///") and ":memory:" not in url:
        return Path(url.removeprefix("sqlite:///"))
    return None


def open_storage(settings: SearchSettings) -> tuple[Any, str]:
    """The Optuna storage object for ``settings`` and its URL as it may be shown (its password hidden,
    :func:`~nas.study.credentials.redact`); ValueError (one sentence, no password) if unreachable. A URL that
    names a user and no password takes it from ``NAS_STORAGE_PASSWORD``, else (PostgreSQL) from libpq's
    ``PGPASSWORD`` or password file: :mod:`nas.study.credentials`."""
    url = storage_url(settings)
    shown = redact(url)
    password = None
    try:
        if url.startswith("journal:") or url.endswith(".log"):
            from optuna.storages.journal import JournalFileBackend, JournalStorage

            path = Path(url.removeprefix("journal:")).expanduser()
            _not_a_folder(path, "journal")
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                return JournalStorage(JournalFileBackend(str(path))), shown
            except json.JSONDecodeError:  # Optuna replays the journal's JSON lines as it opens it
                raise ValueError(
                    f"{path} is not an Optuna journal (its lines are not JSON records); name a new file or a "
                    "journal a search wrote"
                ) from None
        if url.startswith("sqlite:///"):
            database = Path(url.removeprefix("sqlite:///"))
            _not_a_folder(database, "database")
            database.parent.mkdir(parents=True, exist_ok=True)
        engine_url = url
        if url.startswith(("postgresql://", "postgres://")):  # no driver named: psycopg 3, a dependency
            engine_url = "postgresql+psycopg://" + url.split("://", 1)[1]
        connect_args: dict[str, Any] = {}
        if url.startswith("sqlite"):
            connect_args["timeout"] = 60
        else:
            engine_url, password = split_password(engine_url)
            if password is not None:
                connect_args["password"] = password
        storage = BatchedRDBStorage(
            engine_url, engine_kwargs={"connect_args": connect_args} if connect_args else None
        )
        if url.startswith("sqlite"):
            _use_write_ahead_log(storage)
        return storage, shown
    except Exception as err:  # SQLAlchemy / driver errors: unreachable host, bad URL, missing driver
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "Failed to import DB access module" in first:
            first = _missing_driver(url)
        elif "no password supplied" in first:
            first += f"; give it in the URL, {PASSWORD_ENV}, PGPASSWORD or ~/.pgpass (PGPASSFILE)"
        raise ValueError(f"storage: cannot open {shown}: {scrub(first, url, [password or ''])}") from None


def _not_a_folder(path: Path, kind: str) -> None:
    """ValueError if the storage file ``path`` is a folder (the driver's own error says nothing of it, or
    comes later, as a write failure)."""
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a {kind} file")


def _missing_driver(url: str) -> str:
    scheme = url.split(":", 1)[0]
    if scheme.startswith("postgresql"):
        return "the PostgreSQL driver is not installed (pip install 'psycopg[binary]')"
    if scheme.startswith("mysql"):
        return "the MySQL driver is not installed (pip install pymysql, and use mysql+pymysql://)"
    return f"no database driver is installed for {scheme}://"


def _use_write_ahead_log(storage: optuna.storages.RDBStorage) -> None:
    """SQLite in write-ahead-log mode with ``synchronous=NORMAL``: a commit appends to the log and syncs
    only at checkpoints, so the many small writes of a trial cost a fraction of a rollback-journal commit,
    and readers never block the writer. A killed process loses nothing it committed; only an operating-system
    crash or power loss may lose the last commits, and it never corrupts the file. WAL needs a local file
    system (not NFS), as SQLite shared by processes does."""
    from sqlalchemy import event

    def on_connect(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", on_connect)
    storage.engine.dispose()  # connections made while Optuna set the schema up reconnect with the pragmas
