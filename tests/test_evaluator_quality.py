"""benchmarks/evaluator_quality.py: proxy variants, the per-study cache a later run resumes from, --status,
--stop-after and --markdown; the bootstrap intervals, in and out of sample, --frozen and --out-of-sample.
The fast tests replace training and the zero-cost scores by deterministic functions of the network
(counting every call) and the data by the synthetic set; the slow one trains."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from benchmark_scripts import load_benchmark

from nas.system.processes import process_alive

ROOT = Path(__file__).resolve().parents[1]


def _load():
    """benchmarks/evaluator_quality.py as module `evaluator_quality` (spawned writers load it too)."""
    return load_benchmark("evaluator_quality")


@pytest.fixture(scope="module")
def eq():
    yield _load()
    del sys.modules["evaluator_quality"]


def _quality(key: str) -> float:
    return int(hashlib.sha1(key.encode()).hexdigest()[:6], 16) / 0xFFFFFF


@pytest.fixture(scope="module")
def synthetic(eq):
    """10000 training images: a reference of 4 x 9984 is 10x the cpu profile's 3968."""
    return eq.load_dataset("synthetic", img_size=32, seed=1, train_samples=10000, val_size=200)


@pytest.fixture
def fake(eq, synthetic, monkeypatch):
    """Training and zero-cost scoring replaced by functions of the shrunk network; ``calls`` records them."""
    calls: list[tuple[str, str]] = []

    def train_part(arch, profile, data, seed, config, device, checkpoint, stop):
        assert checkpoint.suffix == ".pt" and not checkpoint.exists()
        net = profile.apply(arch).key
        calls.append((f"{profile.name}/lr{config.lr}" + ("" if device.type == "cpu" else f"@{device}"), net))
        noise = _quality(net + profile.name + str(config.lr)) * (0.02 if "reference" in profile.name else 0.3)
        return {"top1": 100 * (_quality(net) + noise) / 1.3, "seconds": 2.0}

    def zero_cost_part(net, data, batch, seed):
        calls.append(("zero_cost", net.key))
        scores = {name: _quality(net.key + name) for name in eq.ZERO_COST}
        return {**scores, **{f"{n}_seconds": 0.1 for n in eq.ZERO_COST}, "seconds": 0.4}

    monkeypatch.setattr(eq, "train_part", train_part)
    monkeypatch.setattr(eq, "zero_cost_part", zero_cost_part)
    monkeypatch.setattr(eq, "load_dataset", lambda name, **kw: synthetic)
    return calls


def _args(tmp_path: Path, *extra: str) -> list[str]:
    # reference: 4 x 9984 images = 39936 >= 10x the cpu profile's 3968; the fakes train nothing
    return [
        "--space", "coatnet", "--seed", "1", "--n", "3", "--no-oneshot",
        "--ref-epochs", "4", "--ref-samples", "10000",
        "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"),
        "--supernet-dir", str(tmp_path / "runs"), *extra,
    ]  # fmt: skip


def test_variant_names(eq):
    base = eq.get_space("coatnet").profile("cpu")
    assert eq.parse_variant("cpu", base) == (base, eq.TrainConfig())
    profile, config = eq.parse_variant("e2-n4000-b128-v6000-lr3e-3", base)
    assert (profile.epochs, profile.train_samples, profile.batch_size, profile.val_samples) == (
        2,
        4000,
        128,
        6000,
    )
    assert config.lr == 3e-3 and profile.width_mult == base.width_mult
    assert eq.parse_variant("lr0.002-e3", base)[0].epochs == 3
    profile, config = eq.parse_variant("b64-bn8", base)  # bn is read as its own letters, not b and n
    assert (profile.batch_size, profile.train_samples, config.bn_recalibration) == (64, base.train_samples, 8)
    for bad in ("fast", "e2-", "e0", "e2-e3", "n40.5", "x2", "lr-1", "bn0", "bn2.5"):
        with pytest.raises(ValueError, match="proxy variant"):
            eq.parse_variant(bad, base)


def test_a_config_field_at_its_value_from_before_it_existed_keeps_the_cached_results_keys(eq):
    """Results cached before ``bn_recalibration`` was a field were computed without recalibrating: the
    settings without it (0) are keyed as they were, and recalibrating is keyed apart."""
    base = eq.get_space("coatnet").profile("cpu")
    data = types.SimpleNamespace(describe=lambda: {"dataset": "fashion-mnist"})
    cpu = torch.device("cpu")
    plain = eq.training_settings(base, eq.TrainConfig(), 1, data, cpu)
    assert "bn_recalibration" not in plain["config"]
    fields = {k: v for k, v in dataclasses.asdict(eq.TrainConfig()).items() if k != "bn_recalibration"}
    before = {"profile": plain["profile"], "config": fields, "seed": 1, "data": {"dataset": "fashion-mnist"}}
    assert eq.settings_id(plain) == eq.settings_id(before)
    recalibrated = eq.training_settings(base, eq.TrainConfig(bn_recalibration=8), 1, data, cpu)
    assert eq.settings_id(recalibrated) != eq.settings_id(plain)


def test_study_resumes_from_its_cache(eq, fake, tmp_path, capsys, monkeypatch):
    assert eq.main(_args(tmp_path, "--variants", "cpu", "lr3e-3", "--status")) == 0
    status = capsys.readouterr().out
    assert "proxy:lr3e-3" in status and status.count("0/3 done") == 4 and not fake

    assert eq.main(_args(tmp_path, "--variants", "cpu", "lr3e-3")) == 0
    assert len(fake) == 3 * 4  # zero-cost, two variants, the reference: once per architecture
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert (tmp_path / "out" / "evaluator_quality-coatnet-s1.png").stat().st_size > 0
    assert not result["partial"] and result["settings"]["trained_images"]["proxy:cpu"] == 3968
    assert result["settings"]["reference_to_proxy_compute"] == pytest.approx(39936 / 3968)
    proxies = {k: v for k, v in result["summary"]["evaluators"].items() if k.startswith("proxy:")}
    assert set(proxies) == {"proxy:cpu", "proxy:lr3e-3"}
    assert all(s["n"] == 3 and -1 <= s["spearman"] <= 1 for s in proxies.values())
    best = result["summary"]["best_proxy"]
    by_rho = max(proxies, key=lambda k: proxies[k]["spearman"]).removeprefix("proxy:")
    assert best["variant"] == by_rho
    assert best["beats_default"] == (
        proxies[f"proxy:{by_rho}"]["spearman"] > proxies["proxy:cpu"]["spearman"]
    )
    capsys.readouterr()

    # a rerun recomputes nothing; a new variant computes only its own results
    fake.clear()
    assert eq.main(_args(tmp_path, "--variants", "cpu", "lr3e-3", "n1000")) == 0
    assert [name for name, _ in fake] == ["cpu-n1000/lr0.001"] * 3
    again = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert again["summary"]["evaluators"]["proxy:cpu"] == result["summary"]["evaluators"]["proxy:cpu"]

    # stopped at once: nothing computed, the outputs and the README table say partial
    fake.clear()
    assert eq.main(_args(tmp_path, "--variants", "cpu", "n1500", "--stop-after", "0")) == 0
    assert not fake
    partial = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert partial["partial"] and partial["missing"]["proxy:n1500"] == 3
    capsys.readouterr()
    assert eq.main(_args(tmp_path, "--variants", "cpu", "n1500", "--markdown")) == 0
    table = capsys.readouterr().out
    assert "(partial: 3 of 3 references; missing per part: proxy:n1500 3)" in table
    assert "| proxy cpu (default) | 3968 | 3 |" in table and "| proxy n1500 | | 0 |" in table


def test_variant_over_a_tenth_of_the_reference_is_refused(eq, fake, tmp_path, capsys):
    assert eq.main(_args(tmp_path, "--variants", "cpu", "e2")) == 2
    err = capsys.readouterr().err.strip()
    assert "more than a tenth of the reference's 39936" in err and len(err.splitlines()) == 1
    assert eq.main(_args(tmp_path, "--variants", "e2-x3")) == 2
    assert "proxy variant 'e2-x3'" in capsys.readouterr().err
    assert not fake


def test_oneshot_variant_names(eq):
    default = eq.parse_oneshot_variant("default")
    config = eq.parse_oneshot_variant("e8-n20000-bn32-ft20-lr1e-3-p2-sw")
    assert (config.epochs, config.train_samples, config.bn_batches) == (8, 20000, 32)
    assert config.finetune_steps == 20
    assert (config.lr, config.random_paths, config.sandwich) == (1e-3, 2, True)
    assert config.batch_size == default.batch_size and not default.sandwich
    assert eq.oneshot_name("default") == "oneshot" and eq.oneshot_name("bn32") == "oneshot:bn32"
    for bad in ("cpu", "sw2", "bn0", "e8-e4", "b64", "ft", "bn32-"):
        with pytest.raises(ValueError, match="one-shot variant"):
            eq.parse_oneshot_variant(bad)


def test_oneshot_variants_share_supernets_and_resume(eq, fake, tmp_path, capsys, monkeypatch):
    """Variants differing only in how they score share one supernet; the default keeps the name
    ``oneshot``; the best variant by Kendall is named; a rerun trains and scores nothing."""
    trained: list[str] = []

    class Evaluator:
        def __init__(self, space, profile, data, seed, config, run_dir, device):
            self.profile, self.config, self.run_dir = profile, config, run_dir

        def train(self, report=None):
            trained.append(self.run_dir.name)
            seconds = 10.0 * self.config.epochs  # all of it in this call, in this process
            return {"train_seconds": seconds, "train_seconds_this_call": seconds, "workers": 1, "epochs": 0}

        def evaluate(self, arch):
            net = self.profile.apply(arch).key
            noise = _quality(net + str(self.config.epochs) + str(self.config.bn_batches))
            fake.append(("oneshot", net))
            return {"top1": 100 * (_quality(net) + 0.5 * noise), "eval_seconds": 1.0}

    monkeypatch.setattr(eq, "oneshot_evaluator", Evaluator)
    argv = [a for a in _args(tmp_path, "--variants", "cpu") if a != "--no-oneshot"]
    argv += ["--oneshot-variants", "default", "bn32", "e8"]
    assert eq.main([*argv, "--status"]) == 0 and not trained
    status = capsys.readouterr().out
    assert "oneshot:e8" in status and "(a one-shot supernet is trained before its first score)" in status
    assert eq.main(argv) == 0
    assert len(trained) == 3 and len(set(trained)) == 2  # default and bn32 train one supernet
    assert sum(name == "oneshot" for name, _ in fake) == 3 * 3
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    summary = result["summary"]["evaluators"]
    assert {"oneshot", "oneshot:bn32", "oneshot:e8"} <= set(summary)
    assert summary["oneshot:e8"]["train_seconds_total"] == 80.0 and summary["oneshot"]["n"] == 3
    # CPU seconds: measured around each score and the supernet's training; the fake proxies record none,
    # as results cached before CPU seconds existed, so their mean is not made up from some of the rows
    assert all(summary[name]["cpu_seconds_per_arch"] >= 0 for name in ("oneshot", "oneshot:e8"))
    assert summary["proxy:cpu"]["cpu_seconds_per_arch"] is None
    assert result["settings"]["trained_images"]["oneshot:e8"] == 8 * (10000 // 64) * 64
    kendall = {name: summary[name]["kendall"] for name in ("oneshot", "oneshot:bn32", "oneshot:e8")}
    best = result["summary"]["best_oneshot"]
    assert best["kendall"] == max(kendall.values()) and best["default"] == "default"
    assert result["costs"]["oneshot:e8_train"] == 80.0
    table = capsys.readouterr().out
    assert "| one-shot supernet (default) |" in table and "| one-shot e8 | 79872 | 3 |" in table
    assert "Best one-shot variant:" in table

    trained.clear()
    fake.clear()
    assert eq.main(argv) == 0 and not trained and not fake
    assert eq.main([*argv[:-3], "bn0"]) == 2
    assert "one-shot variant 'bn0'" in capsys.readouterr().err


def test_shards_share_a_study_and_together_compute_it_once(eq, fake, tmp_path, capsys):
    n = ["--n", "5", "--variants", "cpu"]
    nets = lambda calls: [net for _, net in calls]  # noqa: E731
    # a claim held by a live process (another shard) keeps every other process off that result
    code = (
        "import json, time; from nas.system.processes import this_process; "
        "print(json.dumps(this_process()), flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        study = eq.Study("coatnet", 1, eq.parse_args([*_args(tmp_path, "--shard", "1/2"), *n]))
        held = study.base.apply(study.archs[1][1]).key  # shard 1's first
        part = next(p for p in study.parts if p.kind == "reference")
        record = json.loads(holder.stdout.readline())
        assert record["pid"] == holder.pid and process_alive(record) is True
        study.claims.path.parent.mkdir(parents=True)
        study.claims.path.write_text(
            json.dumps({f"reference/{eq.settings_id(part.settings)}/{held}": record})
        )
        # shard 0 computes its own share, then the other shard's (all but the claimed reference)
        assert eq.main([*_args(tmp_path, "--shard", "0/2"), *n]) == 0
        assert nets(fake)[:3] == [study.base.apply(study.archs[i][1]).key for i in (0, 2, 4)]  # own first
        assert len(set(nets(fake))) == 5 and nets(fake).count(held) == 2  # zero-cost and proxy, no reference
        partial = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
        assert partial["partial"] and partial["summary"]["reference"]["n"] == 4
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    # its holder gone, the claim is void: shard 1 computes that reference, and nothing else is left
    fake.clear()
    assert eq.main([*_args(tmp_path, "--shard", "1/2"), *n]) == 0
    assert [name for name, _ in fake] == ["cpu-reference/lr0.001"] and nets(fake) == [held]
    assert json.loads(study.claims.path.read_text()) == {}  # given back once cached
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert not result["partial"] and result["summary"]["reference"]["n"] == 5  # the last shard read both
    fake.clear()
    assert eq.main([*_args(tmp_path), *n]) == 0 and not fake
    for bad in ("2/2", "1", "a/b", "-1/2"):
        with pytest.raises(SystemExit) as exit_:
            eq.parse_args(_args(tmp_path, "--shard", bad))
        assert exit_.value.code == 2
    assert "--shard" in capsys.readouterr().err


def test_stop_after_starts_no_training_its_estimate_says_ends_past_it(
    eq, fake, tmp_path, capsys, monkeypatch
):
    """The estimate: per proxy variant, the network's cached seconds under it times the study's median ratio
    of the part's seconds to that variant's; the median of those. A training that would end past
    --stop-after is left for a later run, and a shorter one after it still runs."""
    variants = ["--variants", "cpu", "lr3e-3", "n1500"]
    argv = lambda n, *extra: [*_args(tmp_path), "--n", str(n), *variants, *extra]  # noqa: E731
    study = eq.Study("coatnet", 1, eq.parse_args(argv(4)))
    nets = [study.base.apply(arch).key for _, arch in study.archs]
    train = eq.train_part

    def timed(arch, profile, data, seed, config, device, checkpoint, stop):
        result = train(arch, profile, data, seed, config, device, checkpoint, stop)
        net = profile.apply(arch).key
        if "reference" in profile.name:
            return {**result, "seconds": 300.0}  # 30x the proxies
        # one run that met a paused process, under the variant with the most images (cpu)
        paused = net == nets[3] and profile.train_samples != 1500 and config.lr != 3e-3
        return {**result, "seconds": 1000.0 if paused else 100.0 if net == nets[2] else 10.0}

    monkeypatch.setattr(eq, "train_part", timed)
    assert eq.main(argv(2)) == 0
    fake.clear()
    capsys.readouterr()
    assert eq.main(argv(4, "--stop-after", "20")) == 0
    out = capsys.readouterr().out
    assert f"reference {nets[2]}: left for a later run (about 50 min, past --stop-after)" in out
    assert fake[-1] == ("cpu-reference/lr0.001", nets[3])  # about 5 min (500 by its paused variant): it fits
    assert [net for name, net in fake if "reference" in name] == [nets[3]]
    study.cache.reload()
    reference = next(p for p in study.parts if p.kind == "reference")
    assert study.estimate(reference, study.base.apply(study.archs[2][1])) == pytest.approx(3000.0)
    zero_cost = next(p for p in study.parts if p.kind == "zero_cost")
    assert study.estimate(zero_cost, study.base.apply(study.archs[2][1])) is None
    fake.clear()
    assert eq.main(argv(4, "--stop-after", "60")) == 0
    assert fake == [("cpu-reference/lr0.001", nets[2])]
    assert "left for" not in capsys.readouterr().out


class SupernetStub:
    """A one-shot evaluator that trains nothing: ``train`` reports each epoch (so a stop can end it) and says
    it took ``SECONDS``; ``trained`` records each epoch reached, per run folder."""

    SECONDS = 3000.0
    trained: ClassVar[list[tuple[str, int]]] = []

    def __init__(self, space, profile, data, seed, config, run_dir, device):
        self.profile, self.config, self.run_dir = profile, config, run_dir

    def train(self, report=None):
        for epoch in range(1, self.config.epochs + 1):
            self.trained.append((self.run_dir.name, epoch))
            if report is not None:
                report(epoch, {"train_loss": 1.0, "train_seconds": 1.0})
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "supernet.pt").touch()
        s = self.SECONDS
        return {"train_seconds": s, "train_seconds_this_call": s, "workers": 1, "epochs": self.config.epochs}

    def evaluate(self, arch):
        return {"top1": 100 * _quality(self.profile.apply(arch).key), "eval_seconds": 1.0}


def test_a_supernet_is_estimated_from_the_other_seeds_and_stops_at_an_epoch(
    eq, fake, tmp_path, capsys, monkeypatch
):
    """--stop-after leaves for a later run a supernet that another seed's study of the space took longer to
    train than the time left, and trains it when it fits; a supernet training past --stop-after stops at the
    end of an epoch, and the next run trains (resumes) it before its first score."""
    SupernetStub.trained = []
    monkeypatch.setattr(eq, "oneshot_evaluator", SupernetStub)
    base = [a for a in _args(tmp_path, "--variants", "cpu") if a != "--no-oneshot"]
    at = base.index("--seed") + 1

    def argv(seed: int, *extra: str) -> list[str]:
        return [*base[:at], str(seed), *base[at + 1 :], "--oneshot-variants", "default", *extra]

    study = eq.Study("coatnet", 1, eq.parse_args(argv(1)))
    part = next(p for p in study.parts if p.kind == "oneshot")
    supernet, epochs = study.oneshots["oneshot"], study.oneshots["oneshot"].config.epochs
    net = study.base.apply(study.archs[0][1])
    assert study.estimate(part, net) is None  # no study of the space has trained one
    assert eq.main(argv(2)) == 0  # seed 2's study: its supernet took 50 minutes
    assert len(SupernetStub.trained) == epochs and SupernetStub.trained[0][0].startswith("coatnet-s2-")
    assert study.estimate(part, net) == pytest.approx(3000.0)
    SupernetStub.trained.clear()
    capsys.readouterr()
    assert eq.main(argv(1, "--stop-after", "20")) == 0
    out = capsys.readouterr().out
    assert f"[1/3] oneshot {net.key}: left for a later run (about 50 min, past --stop-after)" in out
    assert not SupernetStub.trained and ("cpu-reference/lr0.001", net.key) in fake  # the rest fitted
    # past the deadline the supernet's training ends after its first epoch, and nothing is scored with it
    on_time = eq.Study.past_deadline
    monkeypatch.setattr(eq.Study, "past_deadline", lambda self: True)
    assert eq.main(argv(1)) == 0
    assert f"training stopped after epoch 1 of {epochs}" in capsys.readouterr().out
    assert len(SupernetStub.trained) == 1 and supernet.train_info(study.cache) is None
    monkeypatch.setattr(eq.Study, "past_deadline", on_time)
    SupernetStub.trained.clear()
    fake.clear()
    assert eq.main(argv(1)) == 0 and len(SupernetStub.trained) == epochs and not fake  # only the supernet
    study.cache.reload()
    assert all(study.cached(part)) and supernet.train_info(study.cache)["train_seconds"] == 3000.0
    assert eq.Study("coatnet", 1, eq.parse_args(argv(1))).estimate(part, net) < 1  # a score: trained, kept


def test_reference_repeats_measure_the_references_noise(eq, fake, tmp_path, capsys, monkeypatch):
    """--ref-repeats K trains the first K architectures' references again from the study's seed + 1000 (and
    nothing else again); the noise and the ceiling come from their differences, shown under the table."""
    seeds: list[tuple[str, int]] = []
    train = eq.train_part

    def seeded(arch, profile, data, seed, config, device, checkpoint, stop):
        result = train(arch, profile, data, seed, config, device, checkpoint, stop)
        net = profile.apply(arch).key
        seeds.append((net, seed))
        if "reference" in profile.name and seed != 1:
            return {**result, "top1": result["top1"] + 1.0 + 0.5 * _quality(net + "again")}
        return result

    monkeypatch.setattr(eq, "train_part", seeded)
    argv = [*_args(tmp_path), "--n", "4", "--variants", "cpu", "--ref-repeats", "3"]
    study = eq.Study("coatnet", 1, eq.parse_args(argv))
    nets = [study.base.apply(arch).key for _, arch in study.archs]
    assert eq.main([*argv, "--status"]) == 0
    assert "reference:repeat" in capsys.readouterr().out and not seeds
    assert eq.main(argv) == 0
    assert sorted(net for net, seed in seeds if seed == 1001) == sorted(nets[:3])  # the first 3, once each
    assert len(seeds) == 4 + 4 + 3  # proxy and reference for all 4, the repeats for 3
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert not result["partial"] and result["missing"]["reference:repeat"] == 0
    noise = result["summary"]["reference_noise"]
    rows = result["rows"]
    diffs = [row["reference"]["top1"] - row["reference:repeat"]["top1"] for row in rows[:3]]
    mean = sum(diffs) / 3
    assert noise["n"] == 3 and noise["n_references"] == 4
    assert noise["run_std"] == pytest.approx((sum((d - mean) ** 2 for d in diffs) / 2 / 2) ** 0.5)
    assert noise["mean_difference"] == pytest.approx(mean) and "reference:repeat" not in rows[3]
    assert "Reference noise: 3 of the references trained again from seed 1001" in capsys.readouterr().out
    assert "reference:repeat" not in result["summary"]["evaluators"]  # not ranked as an evaluator
    seeds.clear()
    assert eq.main(argv) == 0 and not seeds  # all cached
    for bad in ("5", "-1"):
        with pytest.raises(SystemExit) as exit_:
            eq.parse_args([*argv[:-1], bad])
        assert exit_.value.code == 2
    assert "--ref-repeats: from 0 to --n (4) architectures, not 5" in capsys.readouterr().err


def test_reference_noise_ceiling_matches_a_simulated_perfect_evaluator(eq):
    """The ceiling from the repeats' differences against Spearman's rho of the true qualities with one
    reference, on simulated studies: normal qualities and run noise, a shift shared by the repeats."""
    import random

    rng = random.Random(0)
    for run_std in (0.3, 1.0):
        truth = [rng.gauss(0, 1) for _ in range(4000)]
        first = [t + rng.gauss(0, run_std) for t in truth]
        again = [t + 2.0 + rng.gauss(0, run_std) for t in truth]  # another seed: shifted, as noisy
        rows = [
            {"reference": {"top1": a}, "reference:repeat": {"top1": b}}
            for a, b in zip(first, again, strict=True)
        ]
        noise = eq.reference_noise(rows)
        assert noise["run_std"] == pytest.approx(run_std, rel=0.05)
        assert noise["spearman_ceiling"] == pytest.approx(eq.spearman(truth, first), abs=0.02)
    assert eq.reference_noise([{"reference": {"top1": 90.0}}]) is None


def test_by_stem_separates_a_stems_offset_from_the_ranking_within_each_stem(eq):
    """An evaluator that orders each stem's networks exactly but sets one stem 10 points low ranks them
    all poorly, and ``by_stem`` shows both: its per-stem means and its within-stem Spearman of 1."""
    rows = []
    for i in range(6):
        for stem, ref in (("attn", 90.0 + 0.3 * i), ("resnet", 90.1 + 0.3 * i)):
            rows.append(
                {
                    "stem": stem,
                    "reference": {"top1": ref},
                    "proxy:cpu": {"top1": ref - (10.0 if stem == "attn" else 0.0)},
                    "zero_cost": {"params": 1.0},
                }
            )
    refs, scores = ([eq.score(r, name) for r in rows] for name in ("reference", "proxy:cpu"))
    assert eq.spearman(refs, scores) < 0.62  # every resnet network placed above every attn one
    stems = eq.by_stem(rows, ["proxy:cpu", "params"])
    assert stems["stems"]["attn"]["n"] == 6
    assert stems["stems"]["attn"]["reference_mean"] == pytest.approx(90.75)
    entry = stems["evaluators"]["proxy:cpu"]
    assert entry["mean"] == pytest.approx({"attn": 80.75, "resnet": 90.85})
    assert entry["spearman"] == {"attn": pytest.approx(1.0), "resnet": pytest.approx(1.0)}
    assert entry["within"] == pytest.approx(1.0) and "params" not in stems["evaluators"]
    table = "\n".join(eq._by_stem_lines(stems))
    assert "| proxy cpu | 80.75 | 90.85 | 1.000 | 1.000 | 1.000 |" in table
    # a stem needs 3 references: with one stem left there is nothing to compare
    assert eq.by_stem([r for r in rows if r["stem"] == "attn" or r["reference"]["top1"] < 90.5], []) is None


def _put_many(path: str, shard: int) -> None:
    module = sys.modules.get("evaluator_quality") or _load()
    cache = module.Cache(Path(path))
    for i in range(40):
        cache.put("reference", {"shard": shard}, f"net{i}", {"top1": float(i)})


def test_cache_writers_in_parallel_lose_nothing(eq, tmp_path):
    path = tmp_path / "cache" / "coatnet-s1.json"
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_put_many, args=(str(path), shard)) for shard in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    assert len(json.loads(path.read_text())["results"]) == 3 * 40


def test_gpu_results_are_cached_apart(eq, fake, tmp_path, capsys, monkeypatch):
    assert eq.main(_args(tmp_path, "--variants", "cpu")) == 0
    with pytest.raises(SystemExit) as exit_:  # no CUDA here: refused before anything trains
        eq.parse_args(_args(tmp_path, "--device", "cuda"))
    assert exit_.value.code == 2 and "--device: 'cuda' is not available here" in capsys.readouterr().err
    assert eq.main(_args(tmp_path, "--variants", "cpu", "--device", "cuda", "--status")) == 0
    status = capsys.readouterr().out  # the CPU's trainings do not count for the GPU; its zero-cost scores do
    assert status.count("0/3 done") == 2 and "zero_cost" in status and status.count("3/3 done") == 1
    monkeypatch.setattr(eq.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(eq.torch.cuda, "get_device_name", lambda device: "fake GPU")
    fake.clear()
    assert eq.main(_args(tmp_path, "--variants", "cpu", "--device", "cuda")) == 0
    assert {name for name, _ in fake} == {"cpu/lr0.001@cuda", "cpu-reference/lr0.001@cuda"}
    gpu = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1-cuda.json").read_text())
    cpu = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert (gpu["settings"]["device"], cpu["settings"]["device"]) == ("cuda", "cpu")


def test_a_training_killed_mid_run_resumes_from_its_last_epoch(eq, synthetic, tmp_path, monkeypatch, capsys):
    """A reference killed after its second epoch's checkpoint continues from it in the next run, one stopped
    by --stop-after after its first in the run after, and both end as an uninterrupted study's; checkpoints go
    once their results are cached. Real training, fake zero-cost."""
    from evaluators import proxy

    monkeypatch.setattr(eq, "load_dataset", lambda name, **kw: synthetic)
    scores = {name: 0.5 for name in eq.ZERO_COST} | {f"{name}_seconds": 0.1 for name in eq.ZERO_COST}
    monkeypatch.setattr(eq, "zero_cost_part", lambda net, data, batch, seed: {**scores, "seconds": 0.4})

    def argv(folder: Path) -> list[str]:
        return [
            "--space", "coatnet", "--seed", "1", "--n", "2", "--no-oneshot", "--variants", "n64-b16-v64",
            "--ref-epochs", "3", "--ref-samples", "320", "--ref-batch", "32", "--ref-val", "64",
            "--out", str(folder), "--cache-dir", str(folder / "cache"),
            "--supernet-dir", str(folder / "runs"),
        ]  # fmt: skip

    assert eq.main(argv(tmp_path / "straight")) == 0
    save = proxy._EpochCheckpoint.save

    class Killed(Exception):
        pass

    def kill_after_two(self, trainer, epoch, *args):
        save(self, trainer, epoch, *args)
        if trainer.epochs == 3 and epoch == 2:
            raise Killed

    monkeypatch.setattr(proxy._EpochCheckpoint, "save", kill_after_two)
    with pytest.raises(Killed):
        eq.main(argv(tmp_path / "killed"))
    kept = list((tmp_path / "killed" / "runs").rglob("*.pt"))
    assert len(kept) == 1  # the proxies' checkpoints went with their cached results
    capsys.readouterr()
    assert eq.main([*argv(tmp_path / "killed"), "--status"]) == 0
    status = capsys.readouterr().out
    assert "0/2 done; 2 left; in progress: epoch 2/3" in status and status.count("in progress") == 1
    monkeypatch.setattr(proxy._EpochCheckpoint, "save", save)
    # --stop-after passes in the next run: the killed reference ends (no stop after its last epoch), the
    # next one stops after its first epoch, kept for the run after
    past = eq.Study.past_deadline
    monkeypatch.setattr(eq.Study, "past_deadline", lambda self: True)
    assert eq.main(argv(tmp_path / "killed")) == 0
    out = capsys.readouterr().out
    assert out.count("training stopped after epoch") == 1 and "stopped after epoch 1 of 3" in out
    assert "--stop-after reached" in out and len(list((tmp_path / "killed" / "runs").rglob("*.pt"))) == 1
    monkeypatch.setattr(eq.Study, "past_deadline", past)
    assert eq.main(argv(tmp_path / "killed")) == 0
    assert not list((tmp_path / "killed" / "runs").rglob("*.pt"))
    rows = {
        name: json.loads((tmp_path / name / "evaluator_quality-coatnet-s1.json").read_text())["rows"]
        for name in ("straight", "killed")
    }
    for key in ("reference", "proxy:n64-b16-v64"):
        assert [r[key]["top1"] for r in rows["killed"]] == [r[key]["top1"] for r in rows["straight"]]
    assert [r["reference"].get("resumed_epochs") for r in rows["killed"]] == [2, 1]
    assert not any("resumed_epochs" in r["reference"] for r in rows["straight"])


@pytest.mark.slow
def test_tiny_study_trains_end_to_end(eq, tmp_path):
    """Real training and zero-cost scores on Fashion-MNIST: 3 architectures, 64-image variants."""
    argv = [
        "--space", "coatnet", "--seed", "1", "--n", "3", "--no-oneshot",
        "--variants", "n64-b16-v64", "e2-n32-b16-v64",
        "--ref-epochs", "2", "--ref-samples", "320", "--ref-batch", "32", "--ref-val", "128",
        "--out", str(tmp_path), "--cache-dir", str(tmp_path / "cache"),
        "--supernet-dir", str(tmp_path / "runs"),  # claims and epoch checkpoints: not the repository's runs/
    ]  # fmt: skip
    assert eq.main(argv) == 0
    result = json.loads((tmp_path / "evaluator_quality-coatnet-s1.json").read_text())
    assert not result["partial"] and result["summary"]["reference"]["n"] == 3
    assert all(0 < row["reference"]["top1"] <= 100 for row in result["rows"])
    assert all(row["reference"]["threads"] == 2 for row in result["rows"])  # --threads' default, per result
    summary = result["summary"]  # this process's CPU seconds, at most all its cores' over the wall time
    trained = [summary["reference"], *(v for k, v in summary["evaluators"].items() if k.startswith("proxy:"))]
    for entry in [*trained, *(summary["evaluators"][name] for name in eq.ZERO_COST)]:
        assert 0 <= entry["cpu_seconds_per_arch"] <= (os.cpu_count() or 1) * entry["seconds_per_arch"] + 1
    assert all(entry["cpu_seconds_per_arch"] > 0 for entry in trained)


# --- bootstrap intervals, in and out of sample, --frozen ---------------------------------------------------


def _np_spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rho by numpy alone: average ranks (ties shared) and their Pearson correlation."""

    def ranks(v: np.ndarray) -> np.ndarray:
        return (v[None, :] < v[:, None]).sum(1) + ((v[None, :] == v[:, None]).sum(1) + 1) / 2

    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _np_kendall(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b by numpy alone, from the pairs' sign matrices."""
    sx, sy = np.sign(x[:, None] - x[None, :]), np.sign(y[:, None] - y[None, :])
    untied_x, untied_y = np.abs(sx).sum(), np.abs(sy).sum()
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return float((sx * sy).sum() / math.sqrt(untied_x * untied_y))


def test_bootstrap_intervals_match_an_independent_numpy_computation(eq):
    rng = np.random.default_rng(5)
    ref = rng.normal(size=12)
    pred = ref + rng.normal(scale=0.8, size=12)
    pred[3] = pred[7]  # a tie in the predictor's scores
    dists = eq.bootstrap_rank_metrics(list(ref), list(pred), resamples=400, seed=7, metrics=eq.OOS_METRICS)
    draws = np.random.default_rng((eq.BOOTSTRAP_SEED, 7)).integers(0, 12, size=(400, 12))
    expected: dict[str, list[float]] = {"spearman": [], "kendall": []}
    for row in draws:
        few = len(np.unique(row)) < 3
        expected["spearman"].append(math.nan if few else _np_spearman(ref[row], pred[row]))
        expected["kendall"].append(math.nan if few else _np_kendall(ref[row], pred[row]))
    for metric in eq.OOS_METRICS:
        np.testing.assert_allclose(dists[metric], expected[metric], rtol=0, atol=1e-12)
        kept = np.array([v for v in expected[metric] if not math.isnan(v)])
        lo, hi = np.quantile(kept, [0.025, 0.975], method="inverted_cdf")
        assert eq.percentile_interval(dists[metric]) == pytest.approx([lo, hi], abs=1e-12)
    # the figure itself lies inside its interval here, and every evaluator of a study is resampled alike
    assert eq.percentile_interval(dists["spearman"])[0] < eq.spearman(ref, pred)
    again = eq.bootstrap_rank_metrics(list(ref), list(ref), resamples=400, seed=7, metrics=("spearman",))
    assert all(v == 1.0 for v in again["spearman"] if not math.isnan(v))


def test_bootstrap_hand_cases(eq):
    assert eq.percentile_interval([float(v) for v in range(40, 0, -1)] + [math.nan]) == [1.0, 39.0]
    assert eq.percentile_interval([math.nan, math.nan]) is None
    assert eq.mean_interval([[0.0, 1.0, math.nan], [1.0, 1.0, 0.0]], level=0.5) == [0.5, 1.0]
    # three architectures: only the resamples that draw all three count (6 of the 27 orders), and a
    # perfect ranking stays perfect in each of them, a reversed one reversed
    ref = [1.0, 2.0, 3.0]
    up = eq.bootstrap_rank_metrics(ref, [10.0, 20.0, 30.0], resamples=2700, seed=1)
    kept = [v for v in up["spearman"] if not math.isnan(v)]
    assert set(kept) == {1.0} and 500 < len(kept) < 700
    assert set(v for v in up["kendall"] if not math.isnan(v)) == {1.0}
    down = eq.bootstrap_rank_metrics(ref, [3.0, 2.0, 1.0], resamples=300, seed=1, metrics=("kendall",))
    assert eq.percentile_interval(down["kendall"]) == [-1.0, -1.0]
    flat = eq.bootstrap_rank_metrics(ref, [5.0, 5.0, 5.0], resamples=300, seed=1, metrics=("spearman",))
    assert eq.percentile_interval(flat["spearman"]) is None  # a constant predictor: no resample counts


def test_summary_and_table_carry_the_intervals(eq, fake, tmp_path, capsys):
    assert eq.main(_args(tmp_path, "--n", "6", "--variants", "cpu", "--resamples", "300")) == 0
    table = capsys.readouterr().out
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    s = result["summary"]["evaluators"]["proxy:cpu"]
    keys = list(s)
    for metric in eq.METRICS:
        assert keys.index(f"{metric}_ci") == keys.index(metric) + 1  # beside its figure
        assert 0 < s["ci_resamples"][metric] <= 300
    lo, hi = s["spearman_ci"]
    assert -1 <= lo <= hi <= 1
    assert f"| {s['spearman']:.3f} [{lo:.2f}, {hi:.2f}] |" in table
    assert result["settings"]["bootstrap"]["resamples"] == 300 and result["settings"]["in_sample"]
    assert "In sample: today's defaults were chosen on seeds 1 and 2." in table
    # without resamples: the figures alone, as before
    assert eq.main(_args(tmp_path, "--n", "6", "--variants", "cpu", "--resamples", "0", "--markdown")) == 0
    assert "[" not in capsys.readouterr().out.split("By stem")[0]


def test_out_of_sample_seeds_draw_fresh_networks(eq):
    assert set(eq.IN_SAMPLE_SEEDS) == set(eq.STUDY_SEEDS) and not set(eq.OUT_OF_SAMPLE_SEEDS) & {1, 2}
    for space in eq.SPACES:
        sp = eq.get_space(space)
        base = sp.profile(eq.PROFILE)
        inside = eq.in_sample_networks(space)
        assert len(inside) == 2 * eq.DEFAULT_N
        for seed in eq.OUT_OF_SAMPLE_SEEDS:
            archs = eq.sample_archs(sp, base, eq.DEFAULT_N, seed, inside)
            assert all(seed * 1000 <= s < (seed + 1) * 1000 for s, _ in archs)  # not 1000-2999
            assert not {base.apply(arch).key for _, arch in archs} & inside
    # sasa seed 3's fifth draw is a network of seed 1's study: skipped
    sp = eq.get_space("sasa")
    base = sp.profile(eq.PROFILE)
    assert base.apply(sp.sample_random(3004)).key in eq.in_sample_networks("sasa")
    assert 3004 not in [s for s, _ in eq.sample_archs(sp, base, 20, 3, eq.in_sample_networks("sasa"))]


def test_frozen_runs_only_todays_defaults(eq, fake, tmp_path, capsys):
    args = eq.parse_args([a for a in _args(tmp_path, "--seed", "3", "--frozen") if a != "--no-oneshot"])
    assert (args.variants, args.oneshot_variants) == ([eq.DEFAULT_VARIANT], [eq.DEFAULT_ONESHOT])
    study = eq.Study("coatnet", 3, args)
    assert sorted(study.evaluators()) == sorted(eq.FROZEN)
    assert [part.name for part in study.parts] == ["zero_cost", "oneshot", "proxy:cpu", "reference"]
    assert not study.in_sample

    assert eq.main(_args(tmp_path, "--seed", "3", "--frozen", "--resamples", "100")) == 0
    assert {name for name, _ in fake} == {"zero_cost", "cpu/lr0.001", "cpu-reference/lr0.001"}
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s3.json").read_text())
    assert set(result["summary"]["evaluators"]) == {"proxy:cpu", *eq.ZERO_COST}  # --no-oneshot
    assert not result["settings"]["in_sample"] and "(out of sample)" in capsys.readouterr().out

    for refused, message in (
        (["--seed", "2", "3", "--frozen"], "seed(s) 2 are in sample"),
        (["--seed", "3", "--frozen", "--variants", "e2"], "not with --variants"),
        (["--out-of-sample", "--oneshot-variants", "e8"], "not with --oneshot-variants"),
    ):
        with pytest.raises(SystemExit):
            eq.parse_args(_args(tmp_path, *refused))
        assert message in capsys.readouterr().err
    assert eq.parse_args(_args(tmp_path, "--seed", "1", "--frozen", "--status")).variants == ["cpu"]


def test_out_of_sample_table_from_the_caches(eq, fake, tmp_path, capsys):
    common = ("--n", "5", "--resamples", "200")
    for seed in ("1", "2"):
        assert eq.main(_args(tmp_path, *common, "--seed", seed, "--variants", "cpu", "lr3e-3")) == 0
    assert eq.main(_args(tmp_path, *common, "--seed", "3", "--frozen")) == 0
    capsys.readouterr()
    fake.clear()
    assert eq.main(_args(tmp_path, *common, "--out-of-sample")) == 0
    assert not fake  # read from the caches: nothing trained or scored
    out = capsys.readouterr().out
    assert "#### `coatnet`: today's defaults in and out of sample" in out
    assert (
        "| evaluator | seed 1 | seed 2 | mean 1, 2 (in sample) | seed 3 | seed 4 | mean 3, 4 (out of " in out
    )
    assert "lr3e-3" not in out and "NASWOT" in out
    rows = [line for line in out.splitlines() if line.startswith("| proxy cpu (default) |")]
    assert len(rows) == 2  # Spearman and Kendall
    cells = rows[0].strip("| ").split(" | ")[1:]
    study = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    s1 = study["summary"]["evaluators"]["proxy:cpu"]
    assert cells[0] == f"{s1['spearman']:.3f} [{s1['spearman_ci'][0]:.2f}, {s1['spearman_ci'][1]:.2f}]"
    assert cells[2].count("[") == 1  # the in-sample mean, with its interval
    assert cells[3].count("[") == 1 and cells[4:] == ["not measured yet", "not measured yet"]

    # a partial study: its figure over what is done, and no group mean until it is whole
    results = {
        seed: {
            "settings": {"n": 5},
            "summary": {"evaluators": {"proxy:cpu": {"n": n, "spearman": 0.5, "spearman_ci": [0.1, 0.8]}}},
        }
        for seed, n in ((1, 5), (2, 5), (3, 5), (4, 3))
    }
    dists = {seed: {"proxy:cpu": {"spearman": [0.4, 0.6]}} for seed in results}
    oos = eq.out_of_sample("coatnet", results, dists)
    spear = oos["evaluators"]["proxy:cpu"]["spearman"]
    assert oos["seeds"] == {"in_sample": [1, 2], "out_of_sample": [3, 4]}
    assert spear["in_sample"] == {"value": 0.5, "ci": [0.4, 0.6]} and spear["out_of_sample"] is None
    assert spear["seeds"][4]["n"] == 3 and oos["evaluators"]["params"]["kendall"]["seeds"][1] is None
