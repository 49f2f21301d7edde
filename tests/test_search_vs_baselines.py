"""benchmarks/search_vs_baselines.py: the found network's choice, the cache's skip and resume, statistics."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from benchmark_scripts import load_benchmark

from search_spaces import get_space


@pytest.fixture(scope="module")
def svb():
    return load_benchmark("search_vs_baselines")


def _nas_train_writes(command, top1, train_seconds=1.0, settings=None):
    """What a finished `nas train` leaves in its --out folder: history.json, ending at ``top1``."""
    out = Path(command[command.index("--out") + 1])
    out.mkdir(parents=True, exist_ok=True)
    history = [{"top1": top1, "loss": 1.0, "train_seconds": train_seconds}]
    (out / "history.json").write_text(json.dumps({"settings": settings or {}, "history": history}))
    return 0


def _row(number, top1, macs, baseline=""):
    return {"number": number, "arch": f"a{number}", "baseline": baseline, "top1": top1, "macs": macs}


def test_pick_found_takes_the_best_searched_trial_within_the_baselines_macs(svb):
    rows = [
        _row(0, 95.0, 100, baseline="Paper-0"),  # a baseline is never the found network
        _row(1, 90.0, 120),  # over the MACs
        _row(2, 80.0, 100),
        _row(3, 85.0, 90),
        _row(4, 85.0, 60),  # ties 3 on top-1 with fewer MACs
        _row(5, 85.0, 60),  # a later trial of the same cost
    ]
    assert svb.pick_found(rows, 100)["number"] == 4
    assert svb.pick_found(rows, 200)["number"] == 1
    assert svb.pick_found(rows, 59) is None


def _job(svb, tmp_path, seed=0):
    arch = get_space("coatnet").baselines()["CoAtNet-0"].arch
    return svb.Training(
        "coatnet",
        arch.to_json(),
        seed,
        "fashion-mnist",
        1,
        32,
        1e-3,
        64,
        tmp_path / "runs",
        tmp_path / "cache",
    )


def test_training_cache_skips_finished_runs_and_resumes_started_ones(svb, tmp_path):
    calls = []

    def fake_nas_train(command):
        calls.append(command)
        return _nas_train_writes(command, 50.0, train_seconds=2.0, settings={"arch": "x"})

    job = _job(svb, tmp_path)
    result, hit = svb.run_training(job, fake_nas_train)
    assert not hit and result["top1"] == 50.0 and "--resume" not in calls[0]
    assert json.loads(job.cache_file.read_text())["top1"] == 50.0
    assert svb.run_training(job, fake_nas_train) == (result, True) and len(calls) == 1  # skipped

    other = _job(svb, tmp_path, seed=1)
    other.out.mkdir(parents=True)
    (other.out / "checkpoint.pt").write_bytes(b"")  # an interrupted run
    svb.run_training(other, fake_nas_train)
    assert "--resume" in calls[1] and other.name != job.name
    with pytest.raises(RuntimeError, match="exited with 3"):
        svb.run_training(_job(svb, tmp_path, seed=2), lambda command: 3)

    busy = _job(svb, tmp_path, seed=3)
    with svb._held(busy.out.with_name(f"{busy.name}.lock")), pytest.raises(svb.Busy):  # another process's
        svb.run_training(busy, fake_nas_train)
    assert len(calls) == 2 and svb.run_training(busy, fake_nas_train)[0]["top1"] == 50.0  # then free


def test_epochs_per_space_and_the_device_key_the_trainings(svb, tmp_path, monkeypatch):
    assert svb.parse_epochs("3") == {"coatnet": 3, "sasa": 3}
    assert svb.parse_epochs("coatnet=4,sasa=11") == {"coatnet": 4, "sasa": 11}
    assert svb.parse_epochs("sasa=11") == {"coatnet": svb.DEFAULT_EPOCHS, "sasa": 11}
    for bad in ("coatnet=x", "vit=2", "0", "coatnet=0", "4,sasa=2"):
        with pytest.raises(ValueError):
            svb.parse_epochs(bad)
    with pytest.raises(SystemExit) as exit_:
        svb.parse_args(["--epochs", "coatnet=four"])
    assert exit_.value.code == 2

    cpu = _job(svb, tmp_path)
    gpu = dataclasses.replace(cpu, device="cuda")
    assert "device" not in cpu.settings and gpu.settings["device"] == "cuda"  # the CPU's keys are kept
    assert gpu.name != cpu.name and gpu.cache_file != cpu.cache_file

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with svb._on_device("cpu"):  # the nas commands started here see no GPU
        assert svb.os.environ["CUDA_VISIBLE_DEVICES"] == ""
    with svb._on_device("cuda"):
        assert svb.os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert svb.os.environ["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.slow  # about a minute on 2 shared cores: nas train loads and validates on all of Fashion-MNIST
def test_a_real_tiny_training_goes_through_nas_train(svb, tmp_path):
    job = _job(svb, tmp_path)
    result, hit = svb.run_training(job)
    assert not hit and 0 <= result["top1"] <= 100 and len(result["history"]) == 1
    assert result["train_settings"]["config"]["train_samples"] == 64


def test_a_search_with_other_proxy_epochs_is_another_search(svb, tmp_path):
    """``--proxy-epochs`` reaches ``nas search`` and keys the search apart; naming the profile's own epochs
    keys it as the profile does (so results searched before a profile's epochs changed stay reachable)."""
    plans = {
        n: svb.SearchPlan("sasa", "3trials", 0, tmp_path / "runs", tmp_path / "cache", n) for n in (None, 1)
    }
    epochs = get_space("sasa").profile("cpu").epochs
    same = svb.SearchPlan("sasa", "3trials", 0, tmp_path / "runs", tmp_path / "cache", epochs)
    assert same.cache_file == plans[None].cache_file != plans[1].cache_file
    assert plans[1].study != plans[None].study == same.study  # a study resumes with its own epochs only
    command = plans[1].command
    assert command[command.index("--proxy-epochs") + 1] == "1" and plans[1].settings["profile"]["epochs"] == 1
    args = svb.parse_args(["--proxy-epochs", "sasa=1", "--status"])
    assert args.proxy_epochs == {"coatnet": None, "sasa": 1}
    with pytest.raises(SystemExit):
        svb.parse_args(["--proxy-epochs", "sasa=0"])


def test_search_record_and_pairs(svb, tmp_path):
    space = get_space("coatnet")
    base = space.baselines()["CoAtNet-0"].arch
    plan = svb.SearchPlan("coatnet", "3trials", 0, tmp_path / "runs", tmp_path / "cache")
    macs = svb.count(base).macs

    def fake_nas_search(command):
        assert "--resume" not in command
        run_dir = plan.runs_dir / plan.study
        run_dir.mkdir(parents=True)
        rows = [
            ("COMPLETE", True, base, "CoAtNet-0", 60.0, macs),
            ("COMPLETE", True, space.sample_random(1), "", 65.0, macs - 1),
            ("COMPLETE", False, space.sample_random(2), "", 99.0, 1),  # over a limit: not in the record
            ("FAIL", True, space.sample_random(3), "", float("nan"), 1),
        ]
        frame = pd.DataFrame(
            [
                {"number": i, "state": s, "feasible": f, "arch": a.key, "baseline": b, "top1": t, "macs": m,
                 "params": 1, "arch_json": a.to_json()}
                for i, (s, f, a, b, t, m) in enumerate(rows)
            ]
        )  # fmt: skip
        frame.to_csv(run_dir / "trials.csv", index=False)
        (run_dir / "manifest.json").write_text(json.dumps({"budget": "3trials"}))
        return 0

    record = svb.run_search(plan, fake_nas_search)
    assert [r["number"] for r in record["rows"]] == [0, 1] and record["front"] == [1]
    assert svb.run_search(plan, lambda command: pytest.fail("ran again")) == record
    pair = svb.make_pair("coatnet", "CoAtNet-0", record)
    assert pair["found"]["trial"] == 1 and pair["found"]["on_front"]
    assert pair["baseline"]["macs"] == macs and pair["baseline"]["proxy_top1"] == 60.0
    assert svb.make_pair("coatnet", "CoAtNet-0", {**record, "rows": record["rows"][:1]})["found"] is None
    short = svb.SearchPlan("coatnet", "9trials", 0, tmp_path / "runs2", tmp_path / "cache")
    short.runs_dir.mkdir()
    with pytest.raises(RuntimeError, match="ended 4 of 9trials"):  # a search stopped short is not kept
        svb.run_search(
            short,
            lambda command: shutil.copytree(plan.runs_dir / plan.study, short.runs_dir / short.study) and 0,
        )
    assert not short.cache_file.exists()


def test_the_study_trains_pairs_seed_by_seed_and_writes_partial_results(svb, tmp_path):
    space = get_space("coatnet")
    args = svb.parse_args(
        ["--spaces", "coatnet", "--seeds", "0,1", "--budget", "2trials", "--train-samples", "64",
         "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path)]
    )  # fmt: skip
    found = space.sample_random(5)
    rows = [
        {"number": 0, "arch": "b", "baseline": "CoAtNet-0", "top1": 50.0, "macs": 4_000_000_000,
         "params": 1, "arch_json": space.baselines()["CoAtNet-0"].arch.to_json()},
        {"number": 1, "arch": found.key, "baseline": "", "top1": 55.0, "macs": 1, "params": 1,
         "arch_json": found.to_json()},
    ]  # fmt: skip
    trained = []

    def fake_nas_train(command):
        assert svb.os.environ["CUDA_VISIBLE_DEVICES"] == ""  # --device cpu: no GPU for the trainings
        trained.append((command[command.index("--seed") + 1], svb.Arch.load(command[4]).key))
        top1 = 60.0 + len(trained) + (5 if svb.Arch.load(command[4]).key == found.key else 0)
        return _nas_train_writes(command, top1)

    study = svb.Study(args, fake_nas_train)
    study.datasets, study.skipped = ["fashion-mnist"], {"cifar10": "no copy"}
    svb._write_json(study.plans["coatnet"].cache_file, {"rows": rows, "front": [1], "trials_ended": 2})
    # CoAtNet-1's found network is the same one: trained once
    assert "0 of 6 trainings finished" in study.status()
    study.run()
    key0, key1 = (space.baselines()[name].arch.key for name in ("CoAtNet-0", "CoAtNet-1"))
    assert trained == [(seed, key) for seed in "01" for key in (found.key, key0, key1)]
    result = json.loads((tmp_path / "search_vs_baselines.json").read_text())
    first, second = result["pairs"]
    assert first["stats"]["n"] == 2 and not first["partial"] and first["stats"]["difference"]["mean"] == 4.0
    assert second["found"]["key"] == found.key and second["stats"]["difference"]["values"] == [3.0, 3.0]
    assert result["settings"]["training_to_proxy_images"]["coatnet"] == pytest.approx(2 * 64 / 3968)  # 2 x 64
    escaped = found.key.replace("|", "\\|")  # the key's pipes would split the cell
    assert f"| CoAtNet-0 | 4.17G / 25.0M | `{escaped}` (1) | 0.00G / 0.0M | 50.0 / 55.0 |" in svb.markdown(
        result
    )
    assert (tmp_path / "search_vs_baselines.png").exists()
    assert "6 of 6 trainings finished" in study.status()

    args.seeds = [0, 1, 2]
    crash = svb.Study(args, lambda c: 1 if svb.Arch.load(c[4]).key == found.key else fake_nas_train(c))
    crash.datasets = ["fashion-mnist"]
    failed = crash.run()
    assert len(failed) == 1 and "exited with 1" in failed[0]  # the baselines' seed 2 ran all the same
    assert "8 of 9 trainings finished" in crash.status()
    first = json.loads((tmp_path / "search_vs_baselines.json").read_text())["pairs"][0]
    assert first["partial"] and first["stats"]["n"] == 2 and first["stats"]["baseline"]["n"] == 3
    args.spaces = ["sasa"]  # a process running the other space reports this one's results all the same
    assert svb.Study(args, fake_nas_train).write()["pairs"][0] == first


def test_the_filters_choose_which_trainings_run_and_the_report_keeps_every_pair(svb, tmp_path):
    space = get_space("coatnet")
    found = space.sample_random(5)
    rows = [
        {"number": 1, "arch": found.key, "baseline": "", "top1": 55.0, "macs": 1, "params": 1,
         "arch_json": found.to_json()},
    ]  # fmt: skip
    common = [
        "--spaces", "coatnet", "--budget", "2trials", "--train-samples", "64",
        "--runs-dir", str(tmp_path / "runs"), "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path),
    ]  # fmt: skip
    trained = []

    def fake_nas_train(command):
        trained.append((int(command[command.index("--seed") + 1]), svb.Arch.load(command[4]).key))
        return _nas_train_writes(command, 60.0)

    args = svb.parse_args([*common, "--pairs", "CoAtNet-1", "--sides", "baseline", "--train-seeds", "2,1"])
    study = svb.Study(args, fake_nas_train)
    study.datasets = ["fashion-mnist"]
    svb._write_json(study.plans["coatnet"].cache_file, {"rows": rows, "front": [1], "trials_ended": 1})
    study.run()
    coatnet1 = space.baselines()["CoAtNet-1"].arch.key
    assert trained == [(2, coatnet1), (1, coatnet1)]
    result = json.loads((tmp_path / "search_vs_baselines.json").read_text())
    assert [p["baseline"]["name"] for p in result["pairs"]] == ["CoAtNet-0", "CoAtNet-1"]
    assert result["pairs"][1]["top1"]["baseline"] == {"1": 60.0, "2": 60.0} and result["pairs"][1]["partial"]
    assert result["settings"]["training"]["seeds"] == [0, 1, 2]  # the study's seeds, not this process's
    assert "2 of 9 trainings finished" in study.status()
    for bad in (["--pairs", "ResNet-26 full-attention"], ["--sides", "both"], ["--train-seeds", "3"]):
        with pytest.raises(SystemExit):
            svb.parse_args([*common, *bad])
