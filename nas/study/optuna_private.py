"""Optuna's private API, used here and nowhere else in the project: every part of Optuna this project relies
on that is not public sits in this one adapter, so that a new Optuna release is checked in one place.

Private parts relied on (Optuna has no public equivalent for any of them):

- ``optuna.storages._rdb.models``: the RDB storage's tables (``TrialModel`` and its ``_datetime_start_utc``
  and ``_datetime_complete_utc`` columns, ``TrialParamModel``, ``TrialValueModel``,
  ``TrialIntermediateValueModel``, ``TrialUserAttributeModel``, ``TrialSystemAttributeModel``,
  ``StudyModel``, ``NOT_FOUND_MSG``), read as plain rows and written in one transaction by
  :class:`BatchedRDBStorage`;
- ``RDBStorage``'s ``_session``, ``_set_trial_param``, ``_set_trial_param_without_commit``,
  ``_set_trial_attr_without_commit`` and ``_get_trials`` (no public batch write or lean read exists);
- ``Study._storage`` (:func:`storage_of`: a worker writes the records of another worker's lost trial, which
  no ``Trial`` object of its own stands for) and ``Trial._trial_id`` / ``FrozenTrial._trial_id``
  (:func:`trial_id`: the storage's key of a trial; the number is per study);
- ``Study._get_trials``, through which Optuna's samplers read a study's history (:class:`SamplerView`: there
  is no public way to hand a sampler another history).

Optuna versions tested: 5.1.0, by the whole test suite (tests/test_trial_path.py holds the batched writes and
the lean reads equal to Optuna's own, record by record; tests/test_rung_zero_sampler.py the sampler view).
pyproject.toml pins ``optuna>=5.0,<6``: Optuna 5 stores the UTC start and end columns read here.

A trial's writes (each suggested parameter is one, each user or system attribute another) are separate
transactions in Optuna's RDB storage; :meth:`BatchedRDBStorage.batched` gathers those a thread makes into one
transaction, and it reads trials back as plain rows rather than through SQLAlchemy's ORM (Optuna reads the
running trial 3 to 5 times per trial).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import importlib
import json
import sqlite3
import threading
from collections.abc import Callable, Container, Iterator
from typing import Any

import optuna
import sqlalchemy
from optuna.distributions import check_distribution_compatibility, distribution_to_json, json_to_distribution
from optuna.storages._rdb import models
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

__all__ = ["BatchedRDBStorage", "SamplerView", "batched_writes", "storage_of", "trial_id"]


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
        ops: list[tuple[Any, ...]] = []
        self._local.ops, self._local.reads = ops, {}
        try:
            yield
        finally:
            self._local.ops = self._local.reads = None
            if ops:
                self._commit(ops)

    def _commit(self, ops: list[tuple[Any, ...]]) -> None:
        """The batch in one transaction: each trial looked up once, the parameters added together, the user
        and system attributes each written by one upsert (SQLite, PostgreSQL; other databases one write
        each)."""
        with self._session() as session:
            with session.no_autoflush:
                for trial_id in dict.fromkeys(op[1] for op in ops):
                    trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
                    self.check_trial_is_updatable(trial_id, trial.state)
            attrs: dict[str, dict[tuple[int, str], Any]] = {"user_attr": {}, "system_attr": {}}
            for kind, trial_id, *args in ops:
                if kind in attrs:
                    attrs[kind][trial_id, args[0]] = args[1]  # the last write of a key wins, as unbatched
                    continue
                name, value, dist, previous = args
                if previous is None:  # a name this process has not seen: Optuna's writer looks it up
                    self._set_trial_param_without_commit(session, trial_id, name, value, dist, None)
                    continue
                check_distribution_compatibility(previous, dist)
                session.add(
                    models.TrialParamModel(
                        trial_id=trial_id,
                        param_name=name,
                        param_value=value,
                        distribution_json=distribution_to_json(dist),
                    )
                )
            self._upsert_attrs(session, models.TrialUserAttributeModel, attrs["user_attr"])
            self._upsert_attrs(session, models.TrialSystemAttributeModel, attrs["system_attr"])

    def _upsert_attrs(self, session: Any, model: Any, attrs: dict[tuple[int, str], Any]) -> None:
        if not attrs:
            return
        dialect = self.engine.name
        if dialect not in ("sqlite", "postgresql") or (
            dialect == "sqlite" and sqlite3.sqlite_version_info < (3, 24)
        ):
            for (trial_id, key), value in attrs.items():
                self._set_trial_attr_without_commit(session, model, trial_id, key, value)
            return
        insert = importlib.import_module(f"sqlalchemy.dialects.{dialect}").insert
        rows = [{"trial_id": t, "key": k, "value_json": json.dumps(v)} for (t, k), v in attrs.items()]
        statement = insert(model).values(rows)
        statement = statement.on_conflict_do_update(
            index_elements=["trial_id", "key"], set_={"value_json": statement.excluded.value_json}
        )
        session.execute(statement)

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

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        ops = getattr(self._local, "ops", None)  # a sampler's own records (NSGA-II's generation)
        if ops is None:
            super().set_trial_system_attr(trial_id, key, value)
        else:
            ops.append(("system_attr", trial_id, key, value))

    # -- reads -------------------------------------------------------------------------------------------
    # Optuna reads a trial back 3 to 5 times per trial (ask, the sampler's trial lists, tell), each through
    # SQLAlchemy's ORM: one object per row and relationship. These read the same rows as plain tuples and
    # build the same FrozenTrial (tests/test_trial_path.py holds them equal to Optuna's own reads).

    def get_trial(self, trial_id: int) -> FrozenTrial:
        with self._session() as session:
            trials = self._read(session, models.TrialModel.trial_id == trial_id)
        if not trials:
            raise KeyError(models.NOT_FOUND_MSG)
        return trials[0]

    def _get_trials(
        self,
        study_id: int,
        states: Container[TrialState] | None,
        included_trial_ids: set[int],
        trial_id_greater_than: int,
    ) -> list[FrozenTrial]:
        # inside a batch this thread's writes are not stored yet, and a sampler asks for the study's trials
        # once per parameter group (TPE with constant liar): the batch's first read answers the others
        reads = getattr(self._local, "reads", None)
        states = None if states is None else tuple(states)  # type: ignore[arg-type]: Optuna passes lists too
        key = (study_id, states, frozenset(included_trial_ids), trial_id_greater_than)
        if reads is not None and key in reads:
            return list(reads[key])
        trial = models.TrialModel
        included = [i for i in included_trial_ids if i <= trial_id_greater_than]
        condition = trial.study_id == study_id
        if states is not None:
            condition = condition & trial.state.in_(states)
        if included and trial_id_greater_than > -1:
            newer = trial.trial_id > trial_id_greater_than
            condition = condition & sqlalchemy.or_(trial.trial_id.in_(included), newer)
        elif trial_id_greater_than > -1:
            condition = condition & (trial.trial_id > trial_id_greater_than)
        with self._session() as session:
            trials = self._read(session, condition)
            if not trials:  # a study with trials exists; without, Optuna's KeyError if it does not
                models.StudyModel.find_or_raise_by_id(study_id, session)
        if reads is not None:
            reads[key] = trials
        return list(trials)

    @contextlib.contextmanager
    def _session(self) -> Iterator[Any]:
        """A session committed at the end of the block (rolled back if it raises), then closed."""
        session = self.scoped_session()
        try:
            yield session
            session.commit()
        except Exception:
            session.rollback()
            raise
        finally:
            session.close()

    @staticmethod
    def _read(session: Any, condition: Any) -> list[FrozenTrial]:
        """The trials matching ``condition`` (on the trials table), in trial id order: four queries (the
        trials, their parameters, their final and intermediate values together, their user and system
        attributes together)."""
        trial = models.TrialModel
        start, end = trial._datetime_start_utc, trial._datetime_complete_utc  # stored in UTC, no zone
        columns = (trial.trial_id, trial.number, trial.state, start, end)
        rows = session.execute(sqlalchemy.select(*columns).where(condition).order_by(trial.trial_id)).all()
        if not rows:
            return []
        ids = sqlalchemy.select(trial.trial_id).where(condition).scalar_subquery()

        def union(*parts: tuple[Any, ...]) -> dict[int, list[Any]]:
            """Rows of several child tables in one query, by trial: (part, *columns), ordered by the first
            column: the row id for parameters, as Optuna orders them; the objective, step or key for the
            others, the order of the unique index Optuna's own reads walk."""
            queries = [
                sqlalchemy.select(sqlalchemy.literal(i), model.trial_id, *cols).where(model.trial_id.in_(ids))
                for i, (model, *cols) in enumerate(parts)
            ]
            query = sqlalchemy.union_all(*queries) if len(queries) > 1 else queries[0]
            out: dict[int, list[Any]] = {}
            for row in session.execute(query.order_by(sqlalchemy.text("1"), sqlalchemy.text("3"))):
                out.setdefault(row[1], []).append((row[0], *row[2:]))
            return out

        text = sqlalchemy.String  # the two value-type enums are different types in PostgreSQL: read as text
        param, value, step = (
            models.TrialParamModel,
            models.TrialValueModel,
            models.TrialIntermediateValueModel,
        )
        user, system = models.TrialUserAttributeModel, models.TrialSystemAttributeModel
        params = union((param, param.param_id, param.param_name, param.param_value, param.distribution_json))
        numbers = union(
            (value, value.objective, value.value, sqlalchemy.cast(value.value_type, text)),
            (step, step.step, step.intermediate_value, sqlalchemy.cast(step.intermediate_value_type, text)),
        )
        attrs = union((user, user.key, user.value_json), (system, system.key, system.value_json))
        value_of, value_type = value.stored_repr_to_value, value.TrialValueType
        step_of, step_type = step.stored_repr_to_intermediate_value, step.TrialIntermediateValueType
        out = []
        for trial_id, number, state, start, complete in rows:
            trial_params = params.get(trial_id, ())
            dists = {name: _distribution(dist) for _, _, name, _, dist in trial_params}
            stored = sorted((n, v, kind) for part, n, v, kind in numbers.get(trial_id, ()) if part == 0)
            kv = attrs.get(trial_id, ())
            out.append(
                FrozenTrial(
                    number=number,
                    state=state,
                    value=None,
                    values=[value_of(v, value_type[kind]) for _, v, kind in stored] if stored else None,
                    datetime_start=_local(start),
                    datetime_complete=_local(complete),
                    params={n: dists[n].to_external_repr(v) for _, _, n, v, _ in trial_params},
                    distributions=dists,
                    user_attrs={k: json.loads(v) for part, k, v in kv if part == 0},
                    system_attrs={k: json.loads(v) for part, k, v in kv if part == 1},
                    intermediate_values={
                        n: step_of(v, step_type[kind])
                        for part, n, v, kind in numbers.get(trial_id, ())
                        if part == 1
                    },
                    trial_id=trial_id,
                )
            )
        return out


def _local(utc: datetime.datetime | None) -> datetime.datetime | None:
    """A stored UTC time as Optuna's model returns it: local time, no zone."""
    if utc is None:
        return None
    return utc.replace(tzinfo=datetime.UTC).astimezone().replace(tzinfo=None)


@functools.lru_cache(maxsize=4096)
def _distribution(text: str) -> Any:
    """A parameter's distribution from its stored JSON (the same few texts recur in every trial)."""
    return json_to_distribution(text)


def batched_writes(storage: Any) -> contextlib.AbstractContextManager[None]:
    """One transaction for this thread's trial writes inside the block, where ``storage`` can batch."""
    return storage.batched() if isinstance(storage, BatchedRDBStorage) else contextlib.nullcontext()


def storage_of(study: optuna.Study) -> Any:
    """The storage a study reads and writes. Optuna has no public accessor; a worker needs it to write the
    records of another worker's trial (a lost one) that no ``Trial`` object of its own stands for."""
    return study._storage


def trial_id(trial: optuna.Trial | optuna.trial.FrozenTrial) -> int:
    """The storage's id of ``trial`` (Optuna has no public accessor; the trial number is per study)."""
    return trial._trial_id


class SamplerView:
    """``study`` as a sampler reads it: its trials passed through ``show`` (a list in, a list out, each in
    its place: Optuna's genetic samplers, 5.1 on, index the list by trial number); every other attribute is
    the study's own. Samplers read a study's trials through ``Study._get_trials``, which this overrides."""

    def __init__(self, study: Study, show: Callable[[list[FrozenTrial]], list[FrozenTrial]]) -> None:
        self._study, self._show = study, show

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None, use_cache: bool = False
    ) -> list[FrozenTrial]:
        trials = self._show(self._study._get_trials(deepcopy=deepcopy, use_cache=use_cache))
        return trials if states is None else [t for t in trials if t.state in states]

    def get_trials(
        self, deepcopy: bool = True, states: Container[TrialState] | None = None
    ) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()
