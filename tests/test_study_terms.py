"""A study is resumed only under the terms its trials were measured with (nas.study.terms): each term that
changes is refused in one sentence naming it, before any trial; a study that predates a term records it at
its resume and is held to it from then on; how long and where it is searched may change."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest

from nas.core.bounds import MAX_EPOCHS
from nas.search.optuna_driver import open_study
from nas.search.trial import TrialRunner
from nas.study.settings import SearchSettings
from nas.study.terms import check_terms, study_terms


def _settings(runs: Path, **changes) -> SearchSettings:
    values = {"space": "coatnet", "evaluator": "proxy", "runs_dir": str(runs), "study": "terms", **changes}
    return SearchSettings(**values)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"profile": "gpu"}, "was searched with profile cpu; it cannot be resumed with profile gpu"),
        (
            {"evaluator_config": {"lr": 3e-3}},
            r"with the proxy evaluator's lr 0.001; it cannot be resumed with lr 0.003 \(give the study's",
        ),
        (
            {"evaluator": "oneshot"},
            "with evaluator proxy; it cannot be resumed with evaluator oneshot",
        ),
        (
            {"dataset": "cifar10"},
            "with dataset fashion-mnist; it cannot be resumed with dataset cifar10",
        ),
        ({"macs_img_size": 160}, "was searched with MACs counted at 224 px; .* at 160 px"),
        ({"max_macs": "3G"}, "was searched under no limits; it cannot be resumed under macs <= 3G"),
        ({"fidelity": "ladder"}, r"was searched with fidelity \{'fidelity': 'single'\}"),
        (
            {"objectives": ("top1", "params")},
            "searches coatnet for top1:max, macs:min; it cannot be resumed for coatnet with top1:max, params",
        ),
    ],
    ids=lambda v: next(iter(v)) if isinstance(v, dict) else None,
)
def test_a_resume_under_other_terms_is_refused_naming_the_term(tmp_path: Path, changes, message) -> None:
    study, _, _ = open_study(_settings(tmp_path))
    assert study.user_attrs["profile"] == "cpu" and study.user_attrs["evaluator"] == "proxy"
    with pytest.raises(ValueError, match=message):
        open_study(_settings(tmp_path, resume=True, **changes))


def test_a_profile_whose_schedule_changed_is_another_proxy(tmp_path: Path, monkeypatch) -> None:
    """A release that changes what a profile trains (coatnet's cpu profile went from 2000 to 4000 images)
    does not silently mix the two proxies in one study."""
    from dataclasses import replace

    from search_spaces.coatnet import CoAtNetSpace

    open_study(_settings(tmp_path))
    cpu = CoAtNetSpace.profiles["cpu"]
    monkeypatch.setitem(CoAtNetSpace.profiles, "cpu", replace(cpu, train_samples=cpu.train_samples // 2))
    with pytest.raises(ValueError) as err:
        open_study(_settings(tmp_path, resume=True))
    assert str(err.value) == (
        f"study 'terms' was searched with the cpu profile's train_samples {cpu.train_samples}; "
        f"it cannot be resumed with train_samples {cpu.train_samples // 2}"
    )
    monkeypatch.setitem(CoAtNetSpace.profiles, "cpu", replace(cpu, description="reworded"))
    open_study(_settings(tmp_path, resume=True))  # a new description is the same proxy


def test_a_study_resumes_on_the_proxy_epochs_it_was_searched_with(tmp_path: Path, monkeypatch) -> None:
    """``--proxy-epochs`` sets the epochs of the profile a study records, so a study searched with it
    resumes only with the same epochs, and one searched on a profile whose epochs changed since resumes on
    its own with ``--proxy-epochs``: the refusal says how."""
    from dataclasses import replace

    from search_spaces.coatnet import CoAtNetSpace

    cpu = CoAtNetSpace.profiles["cpu"]
    open_study(_settings(tmp_path, study="longer", proxy_epochs=cpu.epochs + 2))
    with pytest.raises(ValueError) as err:
        open_study(_settings(tmp_path, study="longer", resume=True))
    assert str(err.value) == (
        f"study 'longer' was searched with the cpu profile's epochs {cpu.epochs + 2}; it cannot be resumed "
        f"with epochs {cpu.epochs} (give --proxy-epochs {cpu.epochs + 2} to resume it)"
    )
    open_study(_settings(tmp_path, study="longer", resume=True, proxy_epochs=cpu.epochs + 2))
    open_study(_settings(tmp_path))
    monkeypatch.setitem(CoAtNetSpace.profiles, "cpu", replace(cpu, epochs=cpu.epochs + 1))  # a new release's
    with pytest.raises(ValueError, match=rf"\(give --proxy-epochs {cpu.epochs} to resume it\)$"):
        open_study(_settings(tmp_path, resume=True))
    open_study(_settings(tmp_path, resume=True, proxy_epochs=cpu.epochs))


def test_how_long_and_where_a_study_runs_may_change(tmp_path: Path) -> None:
    open_study(_settings(tmp_path))
    open_study(_settings(tmp_path, resume=True, budget="1h", seed=3, workers=2, latency_device="cpu"))
    # MACs counted at the target size, named or not (a study started without it was refused with it)
    open_study(_settings(tmp_path, resume=True, macs_img_size=224))
    open_study(_settings(tmp_path / "named", macs_img_size=224))
    open_study(_settings(tmp_path / "named", resume=True))


def test_latency_terms_count_only_where_latency_is_searched(tmp_path: Path) -> None:
    limited = _settings(tmp_path, max_latency="5ms", latency_batch=1)
    open_study(limited)
    with pytest.raises(ValueError, match=r"with latency on cpu at batch 1; .* on cpu at batch 8"):
        open_study(_settings(tmp_path, resume=True, max_latency="5ms", latency_batch=8))
    open_study(_settings(tmp_path, resume=True, max_latency="5ms", latency_device="cpu"))  # where it was


def test_latency_is_a_term_of_the_device_it_was_measured_on(tmp_path: Path, monkeypatch) -> None:
    """Recorded unresolved (None: "the search's device"), a study measured on a GPU resumed on a CPU
    machine, mixing the two devices' latencies in one front."""
    import torch

    with monkeypatch.context() as gpu:
        gpu.setattr(torch.cuda, "is_available", lambda: True)
        open_study(_settings(tmp_path, max_latency="5ms"))  # the trials, and latency, on cuda
    with pytest.raises(ValueError, match=r"with latency on cuda:0 at batch 1; .* with latency on cpu"):
        open_study(_settings(tmp_path, resume=True, max_latency="5ms"))
    open_study(_settings(tmp_path, resume=True, max_latency="5ms", latency_device="cuda"))  # as measured


def test_a_study_from_before_the_terms_records_them_at_its_resume(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    (tmp_path / "terms").mkdir()
    old = optuna.create_study(
        study_name="terms",
        storage=f"sqlite:///{tmp_path}/terms/study.db",
        directions=["maximize", "minimize"],
    )
    terms = study_terms(settings)
    for name in ("space", "objectives", "limits"):  # what a study of wave 1 recorded
        old.set_user_attr(name, terms[name])
    study, _, _ = open_study(_settings(tmp_path, resume=True, profile="gpu"))  # nothing to hold it to
    assert study.user_attrs["profile"] == "gpu" and study.user_attrs["fidelity"] == {"fidelity": "single"}
    with pytest.raises(ValueError, match="with profile gpu; it cannot be resumed with profile cpu"):
        open_study(_settings(tmp_path, resume=True))


def test_an_evaluator_config_recorded_before_a_field_existed_reads_as_measured_then() -> None:
    """A proxy study recorded before ``bn_recalibration`` validated on the running statistics: it resumes
    where the field is 0 (as then) and is refused, naming the field, where it is not."""
    terms = study_terms(SearchSettings())
    recorded = dict(terms)
    recorded["evaluator_config"] = {
        k: v for k, v in terms["evaluator_config"].items() if k != "bn_recalibration"
    }
    recalibrating = study_terms(SearchSettings(evaluator_config={"bn_recalibration": 8}))
    as_then = study_terms(SearchSettings(evaluator_config={"bn_recalibration": 0}))
    check_terms("old", recorded, as_then)
    with pytest.raises(ValueError) as err:
        check_terms("old", recorded, recalibrating)
    assert str(err.value) == (
        "study 'old' was searched with the proxy evaluator's bn_recalibration 0; it cannot be resumed with "
        "bn_recalibration 8 (give the study's in evaluator-config to resume it)"
    )


def test_how_often_the_proxy_validates_is_not_a_term() -> None:
    """A search's proxy validates after a trial's last epoch only; a study searched when it validated every
    epoch (``eval_every`` 1, recorded) measured the same, so it resumes under today's default."""
    now = study_terms(SearchSettings())
    assert now["evaluator_config"]["eval_every"] == MAX_EPOCHS
    check_terms("old", study_terms(SearchSettings(evaluator_config={"eval_every": 1})), now)
    with pytest.raises(ValueError, match=r"evaluator's lr 0\.001; it cannot be resumed with lr 0\.002"):
        check_terms("old", now, study_terms(SearchSettings(evaluator_config={"lr": 0.002, "eval_every": 1})))


def test_a_ladder_recorded_before_its_schedule_was_a_choice_reads_as_its_defaults() -> None:
    terms = study_terms(SearchSettings(fidelity="ladder", min_fidelity=500, rung_val_images="all"))
    recorded = {**terms, "fidelity": {"fidelity": "ladder", "eta": 3, "rungs": 3, "min_fidelity": 500}}
    check_terms("old", recorded, terms)
    with pytest.raises(ValueError, match="rung schedule top; it cannot be resumed with rung schedule rung"):
        check_terms("old", recorded, {**terms, "fidelity": {**terms["fidelity"], "rung_schedule": "rung"}})
    # it validated every rung on all the profile's images: today's default (500) is another ladder
    with pytest.raises(
        ValueError, match="rung val images all; it cannot be resumed with rung val images 500"
    ):
        check_terms("old", recorded, study_terms(SearchSettings(fidelity="ladder", min_fidelity=500)))
    # it promoted by ASHA's rule: a quota is another search
    with pytest.raises(ValueError, match="promotion asha; it cannot be resumed with promotion quota"):
        check_terms("old", recorded, {**terms, "fidelity": {**terms["fidelity"], "promotion": "quota"}})


def test_a_ladder_on_the_old_default_rung_zero_resumes_only_on_it() -> None:
    """Until 2026-11 rung 0 trained on half the proxy's images by default (2000 of coatnet's cpu 4000), and
    the study recorded min_fidelity None; the default is now a sixth at eta 3 (a rule the study records by
    name). A plain resume would climb another ladder: refused, naming the count that resumes it."""
    old = SearchSettings(fidelity="ladder", rung_val_images="all")
    recorded = {**study_terms(old), "fidelity": {**study_terms(old)["fidelity"], "min_fidelity": None}}
    with pytest.raises(ValueError, match=r"rung 0 on half the proxy's images; .* give --min-fidelity 2000 "):
        check_terms("old", recorded, study_terms(old))
    with pytest.raises(ValueError, match="give --min-fidelity 2000"):
        check_terms("old", recorded, study_terms(SearchSettings(fidelity="ladder", min_fidelity=1999)))
    check_terms(
        "old",
        recorded,
        study_terms(SearchSettings(fidelity="ladder", min_fidelity=2000, rung_val_images="all")),
    )
    # a profile that trains on the whole dataset (gpu): its size is no term, so the count given is the study's
    gpu = SearchSettings(fidelity="ladder", profile="gpu", rung_val_images="all")
    whole = {**study_terms(gpu), "fidelity": {**study_terms(gpu)["fidelity"], "min_fidelity": None}}
    check_terms("old", whole, study_terms(dataclasses.replace(gpu, min_fidelity=300000)))
    with pytest.raises(ValueError, match=r"give --min-fidelity N, half of the images its proxy trains on,"):
        check_terms("old", whole, study_terms(gpu))


def test_the_default_ladder_is_the_one_the_benchmark_measured(tmp_path: Path) -> None:
    """Rung 0 on 1/(2 eta) of the proxy's images: on coatnet's cpu profile (62 batches of 64) the rungs
    bench_fidelity.py measured (661, 1983, 5949 images), its rungs below the top on 500 validation images."""
    ladder = TrialRunner(_settings(tmp_path, fidelity="ladder")).ladder
    assert [ladder.images(r) for r in range(ladder.rungs)] == [661, 1983, 5949]
    assert (ladder.validation(0), ladder.validation(1), ladder.validation(2)) == (500, 500, None)
    assert study_terms(_settings(tmp_path, fidelity="ladder"))["fidelity"]["min_fidelity"] == (
        "rung 1 on half the proxy's images"
    )
    eta2 = TrialRunner(_settings(tmp_path, fidelity="ladder", eta=2, rungs=4)).ladder
    assert [eta2.images(r) for r in range(4)] == [992, 1984, 3968, 7936]  # rung 1 is still half the proxy
