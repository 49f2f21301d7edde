"""What a study is searched under, and the check that a resume keeps it: one rule for both engines.

A study's trials are comparable only when they were measured the same way: the same space, narrowed the
same way (the decisions' values are the sampler's distributions), objectives and hard limits, the same
fidelity (single, or the ladder's shape), the same evaluator with the same resolved configuration and proxy
profile (by name and by what it trains: a profile whose schedule changed between releases is a different
proxy), the same dataset, the MACs counted at the same image size and, where latency is searched or limited,
measured on the same device at the same batch. The first session records these
*terms* with the study (Optuna: one study user attribute per term; Ray: a ``terms`` line of the ledger); a
resume under other terms is refused in one sentence, before any trial runs, naming the first term that
differs. A term a study did not record (it was started before the term was) is taken from the resume and
recorded then. The workers, budget, seed and device may change between sessions: they decide how and how
long the study is searched, not what its trials measure. The backend may not, for another reason: each
engine keeps the study where the other cannot read it (:func:`nas.search.preflight.preflight` refuses it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nas.study.constraints import Limits
from nas.study.settings import TARGET_IMG_SIZE
from search_spaces.narrowed import describe

__all__ = ["check_terms", "study_terms"]

# the terms of a ladder recorded before they were choices: what such a study climbed by
_FIDELITY_DEFAULTS = {"rung_schedule": "top", "rung_val_images": None, "promotion": "asha"}
# ``min_fidelity`` is recorded as given, or as the rule that resolves it (it depends on the data): this one,
# :func:`~nas.study.fidelity.default_min_images`. A study recorded None before the rule had a name, when rung
# 0 trained on half the proxy's images (at least one batch): the rule such a study climbs by.
_MIN_FIDELITY_RULE = "rung 1 on half the proxy's images"
_LEGACY_MIN_FIDELITY = "rung 0 on half the proxy's images"


def study_terms(settings: Any) -> dict[str, Any]:
    """The terms of a search (JSON values), in the order a refusal names the first that differs."""
    config = settings.evaluator_config_used
    kind, _, folder = settings.dataset.partition(":")
    return {
        "space": settings.space,
        "narrow": settings.narrow,
        "objectives": [str(o) for o in settings.parsed_objectives],
        "limits": settings.limits.to_dict(),
        "fidelity": _fidelity(settings),
        "evaluator": settings.evaluator,
        "evaluator_config": dataclasses.asdict(config) if config is not None else None,
        "profile": settings.profile,
        "proxy_profile": _profile_fields(settings),
        "dataset": f"{kind}:{Path(folder).expanduser().resolve()}" if folder else settings.dataset,
        "macs_img_size": settings.macs_img_size,
        "latency": [settings.latency_device_used, settings.latency_batch]
        if settings.measures_latency
        else None,
    }


def check_terms(study: str, recorded: Mapping[str, Any], terms: Mapping[str, Any]) -> None:
    """ValueError in one sentence if a term ``recorded`` holds differs from ``terms`` (a term it lacks is
    not checked)."""
    for name, now in terms.items():
        if name not in recorded:
            continue
        was = recorded[name]
        if name == "fidelity" and was.get("fidelity") == "ladder":
            was = _recorded_ladder(was, now, recorded.get("proxy_profile"))
        configs = name == "evaluator_config" and isinstance(was, Mapping) and isinstance(now, Mapping)
        if configs:  # a field recorded before it existed as the value measured with; eval_every aside
            from evaluators.proxy import as_measured  # heavy: torch

            was, now = as_measured(was, now)
        if _same(name, was, now):
            continue
        if configs:  # the fields that differ, and how to resume under them
            changed = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
            raise ValueError(
                f"study {study!r} was searched with the {terms['evaluator']} evaluator's "
                f"{_fields(was, changed)}; it cannot be resumed with {_fields(now, changed)} "
                "(give the study's in evaluator-config to resume it)"
            )
        if name == "fidelity" and was.get("fidelity") == now.get("fidelity") == "ladder":
            changed = [k for k in now if was.get(k) != now.get(k)]
            hint = ""
            if was.get("min_fidelity") == _LEGACY_MIN_FIDELITY:
                legacy = _legacy_min_images(recorded.get("proxy_profile"))
                count = legacy or "N, half of the images its proxy trains on,"
                hint = f" (to resume it on its own rung 0, give --min-fidelity {count} with its other terms)"
            raise ValueError(
                f"study {study!r} climbs a ladder with {_ladder_fields(was, changed)}; "
                f"it cannot be resumed with {_ladder_fields(now, changed)}{hint}"
            )
        if name == "proxy_profile":  # the fields that differ, not the whole profile
            changed = sorted(k for k in {*was, *now} if was.get(k) != now.get(k))
            epochs = was.get("epochs") if changed == ["epochs"] else None
            hint = f" (give --proxy-epochs {epochs} to resume it)" if isinstance(epochs, int) else ""
            raise ValueError(
                f"study {study!r} was searched with the {terms['profile']} profile's "
                f"{_fields(was, changed)}; it cannot be resumed with {_fields(now, changed)}{hint}"
            )
        if name in ("space", "objectives"):  # the study's identity: both named
            searched = ", ".join(recorded.get("objectives", []))
            raise ValueError(
                f"study {study!r} searches {recorded.get('space')} for {searched}; "
                f"it cannot be resumed for {terms['space']} with {', '.join(terms['objectives'])}"
            )
        raise ValueError(
            f"study {study!r} was searched {_describe(name, was)}; "
            f"it cannot be resumed {_describe(name, now)}"
        )


def _profile_fields(settings: Any) -> dict[str, Any]:
    """The proxy profile's fields (shape and schedule, ``--proxy-epochs`` applied), its name and description
    aside."""
    profile = dataclasses.asdict(settings.proxy_profile)
    return {k: v for k, v in profile.items() if k not in ("name", "description")}


def _fields(values: Mapping[str, Any], names: list[str]) -> str:
    return ", ".join(f"{name} {values.get(name, 'unset')}" for name in names)


def _ladder_fields(values: Mapping[str, Any], names: list[str]) -> str:
    """A ladder's terms in words; None is rung_val_images' "all" (the one term that may be None)."""
    shown = {k: "all" if v is None else v for k, v in values.items()}
    return ", ".join(f"{name.replace('_', ' ')} {shown.get(name, 'unset')}" for name in names)


def _recorded_ladder(was: Mapping[str, Any], now: Mapping[str, Any], profile: Any) -> dict[str, Any]:
    """A recorded ladder with the terms it predates filled in: the defaults of its time, and for
    ``min_fidelity`` the rule of its time; a count given now that this rule gives for the recorded profile
    reads as the same (so such a study resumes with ``--min-fidelity`` that count). Where that profile trains
    on the whole dataset (its size is not a term) or was not recorded, the count given is taken as the
    study's."""
    was = {**_FIDELITY_DEFAULTS, **was}
    if was.get("min_fidelity") is None:
        was["min_fidelity"] = _LEGACY_MIN_FIDELITY
        asked, legacy = now.get("min_fidelity"), _legacy_min_images(profile)
        if isinstance(asked, int) and legacy in (asked, None):
            was["min_fidelity"] = asked
    return was


def _legacy_min_images(profile: Any) -> int | None:
    """Rung 0's images under the rule before 2026-11 (half the proxy's, at least one batch), from the
    recorded proxy profile; None where the profile trains on the whole dataset (its size is not a term)."""
    if not isinstance(profile, Mapping) or not profile.get("train_samples"):
        return None
    try:
        return max(int(profile["batch_size"]), int(profile["epochs"]) * int(profile["train_samples"]) // 2)
    except (KeyError, TypeError, ValueError):
        return None


def _fidelity(settings: Any) -> dict[str, Any]:
    if settings.fidelity != "ladder":
        return {"fidelity": "single"}
    return {
        "fidelity": "ladder",
        "eta": settings.eta,
        "rungs": settings.rungs,
        "min_fidelity": _MIN_FIDELITY_RULE if settings.min_fidelity is None else settings.min_fidelity,
        "rung_schedule": settings.rung_schedule,
        "rung_val_images": settings.rung_val_images,
        "promotion": settings.promotion,
    }


def _cuda0(device: str) -> str:
    return "cuda:0" if device == "cuda" else device


def _same(name: str, was: Any, now: Any) -> bool:
    if name == "limits":
        return Limits.from_dict(was) == Limits.from_dict(now)
    if name == "latency" and was is not None and now is not None:
        (device, batch), (device_now, batch_now) = was, now  # a device None: recorded unresolved, before
        return batch == batch_now and (device is None or _cuda0(device) == _cuda0(device_now))
    if name == "macs_img_size":  # unset counts at the target size: the same as giving it
        return (was or TARGET_IMG_SIZE) == (now or TARGET_IMG_SIZE)
    return was == now


def _describe(name: str, value: Any) -> str:
    if name == "limits":
        return f"under {Limits.from_dict(value).describe() or 'no limits'}"
    if name == "narrow":
        return f"with --narrow {describe(value)}" if value else "over the whole space"
    if name == "macs_img_size":
        return f"with MACs counted at {value or TARGET_IMG_SIZE} px"
    if name == "latency":
        if not value:
            return "without latency"
        device, batch = value
        return f"with latency on {device or 'the search device'} at batch {batch}"
    shown = value if value is not None else "the default"
    return f"with {name.replace('_', ' ')} {shown}"
