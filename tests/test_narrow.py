"""Narrowed spaces (`--narrow s3.op=rel,ext`): each narrowed decision offers only the values kept, so
sampling, membership, the baselines inside and the count all follow the space's one definition; a narrowing
is checked and made canonical before anything runs, recorded as a term of the study, and searched on both
engines."""

from __future__ import annotations

import json
import random
from pathlib import Path

import optuna
import pandas as pd
import pytest
from cheap_search import cheap_settings
from space_enumeration import count_by_enumeration
from typer.testing import CliRunner

from nas.cli.commands import app
from nas.core.arch import Arch
from search_spaces import get_space, list_spaces
from search_spaces.base import RandomTrial
from search_spaces.coatnet import CoAtNetSpace
from search_spaces.narrowed import NarrowedSpace, describe, narrow_space, narrowing, parse_items

SMALL_COATNET = CoAtNetSpace(
    ops=("mbconv", "local", "rel"),
    local_k=(3, 5),
    depths=((1, 2), (1, 3), (2, 3)),
    widths=((64, 96), (128,), (256, 512)),
    stem_widths=(32, 64),
    patches=(8,),
)


class _Recorder(RandomTrial):
    """Random answers, and every (name, offered values) the space asked."""

    def __init__(self, seed: int) -> None:
        super().__init__(random.Random(seed))
        self.asked: dict[str, list] = {}

    def suggest_categorical(self, name, choices):
        self.asked[name] = list(choices)
        return super().suggest_categorical(name, choices)

    def suggest_int(self, name, low, high, step=1, log=False):
        self.asked[name] = list(range(low, high + 1, step))
        return super().suggest_int(name, low, high, step, log)


@pytest.mark.parametrize("space", [*list_spaces(), "small-coatnet"])
def test_decisions_are_what_sample_asks(space: str) -> None:
    """Every decision is asked by some sample, with exactly the values declared; nothing else is asked."""
    sp = SMALL_COATNET if space == "small-coatnet" else get_space(space)
    declared = {name: list(values) for name, values in sp.decisions().items()}
    asked: dict[str, list] = {}
    for seed in range(300):
        recorder = _Recorder(seed)
        sp.sample(recorder)
        asked.update(recorder.asked)
    assert asked == declared


@pytest.mark.parametrize(
    ("space", "narrow"),
    [
        ("sasa", {"stem": "resnet", "s1.op": "conv", "s2.depth": "2..3", "s3.op": "local", "s3.k": "3,7"}),
        ("small", {"stem": "patch"}),
        ("small", {"stem.patch": 8, "s2.op": ["local", "rel"], "s2.k": 5, "s3.width": 512}),
        ("small", {"s1.op": "local", "s1.k": "3", "s3.depth": "3", "stem.width": "32"}),
        ("small", {"stem": "conv", "s2.op": "mbconv,rel", "s1.depth": "2"}),
    ],
)
def test_a_narrowed_count_is_the_number_of_distinct_architectures(space: str, narrow: dict) -> None:
    base = SMALL_COATNET if space == "small" else get_space(space)
    narrowed = narrow_space(base, narrow)
    assert 0 < narrowed.cardinality() == count_by_enumeration(narrowed) < base.cardinality()


def test_narrowed_samples_keep_the_values_and_stay_inside_both_spaces() -> None:
    base = get_space("coatnet")
    space = narrow_space(base, {"stem": "conv", "s3.op": "rel,ext", "s2.depth": "2..4", "s4.width": [768]})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(60):
        trial = study.ask()
        arch = space.sample(trial)
        assert arch.stem.kind == "conv" and arch.stages[2].mixer in ("rel", "ext")
        assert 2 <= arch.stages[1].depth <= 4 and arch.stages[3].width == 768
        assert space.why_not(arch) is None and base.why_not(arch) is None
        assert space.sample(optuna.trial.FixedTrial(space.encode(arch))) == arch
        study.tell(trial, 0.0)
    # the sampler sees the narrowed distributions
    distributions = study.trials[-1].distributions
    assert distributions["s3.op"].choices == ("rel", "ext") and distributions["s4.width"].choices == (768,)
    assert (distributions["s2.depth"].low, distributions["s2.depth"].high) == (2, 4)


def test_membership_and_baselines_follow_the_narrowing() -> None:
    base = get_space("coatnet")
    space = narrow_space(base, {"s3.op": "ext,local", "s4.op": "rel"})
    coatnet0 = base.baselines()["CoAtNet-0"].arch  # S3 is relative attention
    assert space.why_not(coatnet0) == "s3.op: 'rel' is not a choice of the space; allowed: local, ext"
    assert "CoAtNet-0" not in space.baselines()
    keeps = narrow_space(base, {"s3.op": "rel,ext", "stem": "conv"})
    assert list(keeps.baselines()) == [n for n, b in base.baselines().items() if b.arch.stem.kind == "conv"
                                       and b.arch.stages[2].mixer in ("rel", "ext")]  # fmt: skip
    assert "ViT_REL" not in keeps.baselines() and "CoAtNet-0" in keeps.baselines()


def test_a_narrowing_is_canonical() -> None:
    sasa = get_space("sasa")
    one = narrowing(sasa, {"s2.depth": "3..4", "stem": ["attn"], "s1.k": "7,3"})
    other = narrowing(sasa, {"s1.k": [3, 7], "stem": "attn", "s2.depth": [4, 3], "s1.op": "local,conv"})
    assert one == other == {"stem": ["attn"], "s1.k": [3, 7], "s2.depth": [3, 4]}  # the space's order
    assert list(one) == ["stem", "s1.k", "s2.depth"]
    assert describe(one) == "stem=attn s1.k=3,7 s2.depth=3,4"
    assert describe({"s3.depth": [4, 5, 6]}) == "s3.depth=4..6"
    assert narrow_space(sasa, {"s1.op": "conv,local"}) is sasa  # kept whole: no narrowing
    assert parse_items(["s1.op=conv", " s2.k = 3,5"]) == {"s1.op": "conv", "s2.k": " 3,5"}


@pytest.mark.parametrize(
    ("narrow", "message"),
    [
        ({"s9.op": "conv"}, "narrow: 's9.op' is not a decision of the sasa space; decisions: stem, s1.op,"),
        ({"s1.op": "attn"}, "narrow: s1.op: 'attn' is not one of its values in the sasa space; allowed: "
                            "conv, local"),
        ({"s1.k": "4"}, "narrow: s1.k: 4 is not one of its values in the sasa space; allowed: 3, 5, 7, 9, "
                        "11"),
        ({"s1.k": "seven"}, "narrow: s1.k: 'seven' is not a whole number (sasa space)"),
        ({"s3.depth": "4,6"}, "narrow: s3.depth: 4, 6 is not a run of whole numbers; keep one, e.g. 4..6"),
        ({"s3.depth": "6..4"}, "narrow: s3.depth: 6..4 is an empty run; write LO..HI with LO <= HI"),
        ({"s3.depth": "4..9"}, "narrow: s3.depth: 9 is not one of its values in the sasa space; "
                               "allowed: 4..6"),
        ({"s3.depth": "5..10**9"}, "narrow: s3.depth: '10**9' is not a whole number (sasa space)"),
        ({"s3.depth": "5..1000000000"}, "narrow: s3.depth: 1000000000 is not one of its values"),
        ({"s1.op": ""}, "narrow: s1.op keeps no value; give at least one of conv, local"),
        ({"s1.op": []}, "narrow: s1.op keeps no value"),
        ({"s1.depth": True}, "narrow: s1.depth: True is not one of its values"),
        ({"s1.op": {"a": 1}}, "narrow: s1.op: {'a': 1} is not one of its values"),
        ({"s1.k": list(range(2000))}, "narrow: s1.k: at most 1000 values, got 2,000"),
        ("s1.op", "narrow: must map decisions to their values"),
    ],
)  # fmt: skip
def test_a_bad_narrowing_is_one_sentence(narrow: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        narrowing(get_space("sasa"), narrow)
    assert str(caught.value).startswith(message), str(caught.value)


def test_settings_take_items_mappings_and_config_files(tmp_path: Path) -> None:
    from nas.study.settings import SearchSettings

    canonical = {"stem": ["resnet"], "s2.depth": [2, 3]}
    assert cheap_settings(tmp_path, narrow=["s2.depth=2..3", "stem=resnet"]).narrow == canonical
    assert cheap_settings(tmp_path, narrow="stem=resnet").narrow == {"stem": ["resnet"]}
    settings = cheap_settings(tmp_path, narrow={"s2.depth": [3, 2], "stem": "resnet"})
    assert settings.narrow == canonical and isinstance(settings.search_space, NarrowedSpace)
    assert settings.search_space.narrowing == canonical
    whole = cheap_settings(tmp_path, narrow={"stem": "resnet,attn"})  # every value kept: the whole space
    assert whole.narrow == {} and not isinstance(whole.search_space, NarrowedSpace)
    (tmp_path / "search.yaml").write_text("space: sasa\nnarrow:\n  stem: resnet\n  s2.depth: 2..3\n")
    assert SearchSettings.from_sources(tmp_path / "search.yaml").narrow == canonical
    with pytest.raises(ValueError, match="narrow: 'x=1' is not a decision"):
        cheap_settings(tmp_path, narrow={"x=1": "2"})
    with pytest.raises(ValueError, match=r"narrow: s1\.op is given twice"):
        cheap_settings(tmp_path, narrow=["s1.op=conv", "s1.op=local"])
    with pytest.raises(ValueError, match="narrow: must be a mapping of settings, got 3"):
        cheap_settings(tmp_path, narrow=3)


def _search(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--objectives", "macs,params",
         "--runs-dir", str(tmp_path / "runs"), "--study", "t", *args],
    )  # fmt: skip
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.integration
def test_a_narrowed_search_samples_only_the_values_kept_and_resumes_only_so(tmp_path: Path) -> None:
    narrow = ["--narrow", "stem=resnet", "--narrow", "s1.op=conv", "--narrow", "s4.depth=2..3"]
    code, output = _search(tmp_path, "--budget", "12trials", *narrow)
    assert code == 0, output
    assert "t (sasa narrowed to stem=resnet s1.op=conv s4.depth=2,3, complexity, optuna)" in output
    table = pd.read_csv(tmp_path / "runs" / "t" / "trials.csv", keep_default_na=False)
    archs = [Arch.from_json(text) for text in table["arch_json"]]
    assert len(archs) == 12 and len({a.key for a in archs}) == 12
    assert all(a.stem.kind == "resnet" and a.stages[0].mixer == "conv" for a in archs)
    assert all(a.stages[3].depth > 1 for a in archs)
    # the baselines the narrowing keeps, first: ResNet-38 and -50 conv (ResNet-26's S4 has depth 1)
    assert list(table["baseline"][:2]) == ["ResNet-38 conv", "ResNet-50 conv"]
    assert not any(table["baseline"][2:])
    manifest = json.loads((tmp_path / "runs" / "t" / "manifest.json").read_text())
    assert manifest["settings"]["narrow"] == {"stem": ["resnet"], "s1.op": ["conv"], "s4.depth": [2, 3]}
    report = (tmp_path / "runs" / "t" / "report.html").read_text()
    assert "sasa, narrowed to stem=resnet s1.op=conv s4.depth=2,3" in report
    # a resume keeps the narrowing (in any spelling), refuses another
    code, output = _search(tmp_path, "--budget", "14trials", "--resume", "--narrow", "s4.depth=3,2",
                           "--narrow", "s1.op=conv", "--narrow", "stem=resnet")  # fmt: skip
    assert code == 0, output
    code, output = _search(tmp_path, "--budget", "16trials", "--resume", "--narrow", "stem=resnet")
    assert code == 2 and output == (
        "error: study 't' was searched with --narrow stem=resnet s1.op=conv s4.depth=2,3; it cannot be "
        "resumed with --narrow stem=resnet"
    ), output
    code, output = _search(tmp_path, "--budget", "16trials", "--resume")
    assert code == 2 and output.endswith("it cannot be resumed over the whole space"), output


@pytest.mark.integration
def test_a_study_of_the_whole_space_is_not_resumed_narrowed(tmp_path: Path) -> None:
    assert _search(tmp_path, "--budget", "2trials", "--no-baselines")[0] == 0
    code, output = _search(tmp_path, "--budget", "4trials", "--resume", "--narrow", "stem=attn")
    assert code == 2 and "study 't' was searched over the whole space; it cannot be resumed with " in output


@pytest.mark.integration
def test_an_enqueued_architecture_outside_the_narrowing_is_refused(tmp_path: Path) -> None:
    get_space("sasa").baselines()["ResNet-26 conv"].arch.save(tmp_path / "mine.json")
    code, output = _search(tmp_path, "--budget", "2trials", "--narrow", "stem=attn", "--enqueue",
                           str(tmp_path / "mine.json"))  # fmt: skip
    assert code == 2 and output == (
        "error: enqueue: mine is not in the sasa space narrowed to stem=attn: stem: 'resnet' is not a choice "
        "of the space; allowed: attn"
    ), output
    assert not (tmp_path / "runs").exists()


@pytest.mark.integration
def test_ray_searches_the_narrowed_space(tmp_path: Path) -> None:
    import ray

    from nas.api import run_search

    narrow = {"stem": "attn", "s2.op": "local", "s2.k": "3"}
    settings = cheap_settings(tmp_path, backend="ray", budget="5trials", narrow=narrow)
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        outcome = run_search(settings)
    finally:
        ray.shutdown()
    archs = [Arch.from_json(text) for text in outcome.trials["arch_json"]]
    assert len(archs) == 5
    assert all(a.stem.kind == "attn" and (a.stages[1].mixer, a.stages[1].k) == ("local", 3) for a in archs)
    with pytest.raises(ValueError, match=r"cannot be resumed with --narrow stem=attn$"):  # before Ray starts
        run_search(cheap_settings(tmp_path, backend="ray", resume=True, narrow={"stem": "attn"}))


def test_spaces_shows_a_narrowed_space_and_refuses_a_bad_narrowing() -> None:
    result = CliRunner().invoke(app, ["spaces", "--space", "sasa", "--narrow", "stem=resnet", "--narrow",
                                      "s1.op=conv"])  # fmt: skip
    output = " ".join(result.output.split())
    assert result.exit_code == 0, output
    assert "narrowed to stem=resnet s1.op=conv" in output and "17,496 architectures" in output
    assert "ResNet-26 conv, ResNet-38 conv, ResNet-50 conv" in output and "coatnet" not in output
    assert "stem, s<i>.op, s<i>.k, s<i>.depth" in output
    for args, message in (
        (["--narrow", "stem=resnet"], "error: narrow: name the space it narrows with --space"),
        (["--space", "sasa", "--narrow", "stem"], "error: narrow: 'stem' is not NAME=VALUES;"),
        (["--space", "sasa", "--narrow", "stem=cnn"], "error: narrow: stem: 'cnn' is not one of its values"),
    ):
        result = CliRunner().invoke(app, ["spaces", *args])
        assert result.exit_code == 2 and " ".join(result.output.split()).startswith(message), result.output


def test_a_oneshot_supernet_samples_the_narrowed_paths_and_records_the_narrowing() -> None:
    from evaluators.oneshot import OneShotConfig, OneShotEvaluator, _settings

    space = get_space("coatnet", {"s1.op": "mbconv", "s2.op": "rel", "stem": "conv"})
    evaluator = object.__new__(OneShotEvaluator)  # the paths it trains, without data or training
    evaluator.space, evaluator.config = space, OneShotConfig(sandwich=True, random_paths=3)
    for seed in range(20):
        for arch in evaluator._paths(random.Random(seed)):
            assert space.why_not(arch) is None
    profile, data = space.profile("cpu"), type("Data", (), {"describe": lambda self: "d"})()
    assert _settings(space, profile, data, 0, OneShotConfig())["narrow"] == space.narrowing
    assert "narrow" not in _settings(get_space("coatnet"), profile, data, 0, OneShotConfig())


def test_a_narrowed_supernet_holds_the_narrowed_ops_only() -> None:
    """Measured: the cpu-profile coatnet supernet holds 19.4M parameters, narrowed to MBConv in S1-S2 and
    relative attention in S3-S4 4.9M (every weight on some path of the narrowing: tests/test_supernet.py)."""
    from evaluators.supernet import Supernet

    base = get_space("coatnet")
    narrowed = narrow_space(base, {"s1.op": "mbconv", "s2.op": "mbconv", "s3.op": "rel", "s4.op": "rel"})
    sizes = [
        sum(p.numel() for p in Supernet(sp, sp.profile("cpu"), num_classes=10, in_chans=1).parameters())
        for sp in (base, narrowed)
    ]
    assert sizes[1] < sizes[0] / 3
    assert all(narrowed.contains(arch) for arch in narrowed.supernet_cover())


def test_spaces_as_json_hold_every_decision_with_its_values() -> None:
    result = CliRunner().invoke(
        app, ["spaces", "--space", "coatnet", "--narrow", "s2.depth=2..5", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    (shown,) = json.loads(result.output)
    space = get_space("coatnet", {"s2.depth": "2..5"})
    assert shown["decisions"]["s2.depth"] == {"low": 2, "high": 5} and shown["decisions"]["s1.op"] == list(
        space.decisions()["s1.op"]
    )
    assert list(shown["decisions"]) == list(space.decisions()) and shown["narrowed"] == {
        "s2.depth": [2, 3, 4, 5]
    }
    assert shown["cardinality"] == space.cardinality() and shown["baselines"] == list(space.baselines())
    assert shown["profiles"]["cpu"]["img_size"] == 32
    every = json.loads(CliRunner().invoke(app, ["spaces", "--format", "json"]).output)
    assert [s["name"] for s in every] == list_spaces() and all(s["narrowed"] == {} for s in every)
