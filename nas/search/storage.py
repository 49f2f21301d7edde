"""Where an Optuna study lives, and the few storage operations Optuna has no public API for.

The study lives in ``runs/<study>/study.db`` (SQLite, write-ahead log) unless ``storage`` names another: any
SQLAlchemy URL (``postgresql://``, ``mysql+pymysql://``, ``sqlite:///``) through Optuna's RDB storage, or a
journal file (``journal:PATH`` or a path ending in ``.log``), so that several workers, in one process group
or on many machines, share one study.

A trial's writes (each suggested parameter is one, each user attribute another) are separate transactions in
Optuna's RDB storage; :meth:`BatchedRDBStorage.batched` gathers those a thread makes into one transaction.
Optuna's private API is used here and nowhere else in the package: :func:`storage_of` and :func:`trial_id`
(no public accessor exists) and the RDB storage's ``*_without_commit`` writers (no public batch write).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna

from nas.search.settings import SearchSettings

__all__ = ["BatchedRDBStorage", "batched_writes", "open_storage", "storage_of", "storage_url", "trial_id"]


def storage_url(settings: SearchSettings) -> str:
    if settings.storage:
        return settings.storage
    return f"sqlite:///{(settings.run_dir / 'study.db').resolve()}"


class BatchedRDBStorage(optuna.storages.RDBStorage):
    """Optuna's RDB storage whose parameter and user-attribute writes, made by one thread inside
    :meth:`batched`, are committed together when the block ends (in one transaction: all or none). Other
    threads (a trial's heartbeat) write at once, as usual."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._local = threading.local()

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        if getattr(self._local, "ops", None) is not None:  # nested: the outer block commits
            yield
            return
        self._local.ops = ops = []
        try:
            yield
        finally:
            self._local.ops = None
            if ops:
                self._commit(ops)

    def _commit(self, ops: list[tuple[Any, ...]]) -> None:
        from optuna.storages._rdb import models  # private: the writers below take its model classes

        session = self.scoped_session()
        try:
            for kind, *args in ops:
                if kind == "param":
                    self._set_trial_param_without_commit(session, *args)
                else:
                    self._set_trial_attr_without_commit(session, models.TrialUserAttributeModel, *args)
            session.commit()
        except Exception:
            session.rollback()
            raise
        finally:
            session.close()

    def _set_trial_param(self, trial_id: int, name: str, value: float, dist: Any, previous: Any) -> None:
        ops = getattr(self._local, "ops", None)
        if ops is None:
            super()._set_trial_param(trial_id, name, value, dist, previous)
        else:
            ops.append(("param", trial_id, name, value, dist, previous))

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        ops = getattr(self._local, "ops", None)
        if ops is None:
            super().set_trial_user_attr(trial_id, key, value)
        else:
            ops.append(("user_attr", trial_id, key, value))


def batched_writes(storage: Any) -> contextlib.AbstractContextManager[None]:
    """One transaction for this thread's trial writes inside the block, where ``storage`` can batch."""
    return storage.batched() if isinstance(storage, BatchedRDBStorage) else contextlib.nullcontext()


def open_storage(settings: SearchSettings) -> tuple[Any, str]:
    """The Optuna storage object for ``settings`` and its URL; ValueError (one sentence) if unreachable."""
    url = storage_url(settings)
    try:
        if url.startswith("journal:") or url.endswith(".log"):
            from optuna.storages.journal import JournalFileBackend, JournalStorage

            path = Path(url.removeprefix("journal:")).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path))), url
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine_url = url
        if url.startswith(("postgresql://", "postgres://")):  # no driver named: psycopg 3, a dependency
            engine_url = "postgresql+psycopg://" + url.split("://", 1)[1]
        storage = BatchedRDBStorage(
            engine_url, engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else None
        )
        if url.startswith("sqlite"):
            _use_write_ahead_log(storage)
        return storage, url
    except Exception as err:  # SQLAlchemy / driver errors: unreachable host, bad URL, missing driver
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "Failed to import DB access module" in first:
            first = _missing_driver(url)
        raise ValueError(f"storage: cannot open {url}: {first}") from None


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


def storage_of(study: optuna.Study) -> Any:
    """The storage a study reads and writes. Optuna has no public accessor; a worker needs it to write the
    records of another worker's trial (a lost one) that no ``Trial`` object of its own stands for."""
    return study._storage


def trial_id(trial: optuna.Trial | optuna.trial.FrozenTrial) -> int:
    """The storage's id of ``trial`` (Optuna has no public accessor; the trial number is per study)."""
    return trial._trial_id
