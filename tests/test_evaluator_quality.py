"""benchmarks/evaluator_quality.py: proxy variants, the per-study cache a later run resumes from, --status,
--stop-after and --markdown. The fast tests replace training and the zero-cost scores by deterministic
functions of the network (counting every call) and the data by the synthetic set; the slow one trains."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import multiprocessing
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    """benchmarks/evaluator_quality.py as module `evaluator_quality` (spawned writers load it too)."""
    spec = importlib.util.spec_from_file_location(
        "evaluator_quality", ROOT / "benchmarks" / "evaluator_quality.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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

    def train_part(arch, profile, data, seed, config, device):
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
        "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache"), *extra,
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
    for bad in ("fast", "e2-", "e0", "e2-e3", "n40.5", "x2", "lr-1"):
        with pytest.raises(ValueError, match="proxy variant"):
            eq.parse_variant(bad, base)


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


def test_shards_share_a_study_and_together_compute_it_once(eq, fake, tmp_path, capsys):
    n = ["--n", "5", "--variants", "cpu"]
    assert eq.main([*_args(tmp_path, "--shard", "0/2"), *n]) == 0
    first = list(fake)
    assert eq.main([*_args(tmp_path, "--shard", "1/2"), *n]) == 0
    second = fake[len(first) :]
    nets = lambda calls: {net for _, net in calls}  # noqa: E731
    assert len(nets(first)) == 3 and len(nets(second)) == 2 and not nets(first) & nets(second)
    result = json.loads((tmp_path / "out" / "evaluator_quality-coatnet-s1.json").read_text())
    assert not result["partial"] and result["summary"]["reference"]["n"] == 5  # the last shard read both
    fake.clear()
    assert eq.main([*_args(tmp_path), *n]) == 0 and not fake
    for bad in ("2/2", "1", "a/b", "-1/2"):
        with pytest.raises(SystemExit) as exit_:
            eq.parse_args(_args(tmp_path, "--shard", bad))
        assert exit_.value.code == 2
    assert "--shard" in capsys.readouterr().err


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


@pytest.mark.slow
def test_tiny_study_trains_end_to_end(eq, tmp_path):
    """Real training and zero-cost scores on Fashion-MNIST: 3 architectures, 64-image variants."""
    argv = [
        "--space", "coatnet", "--seed", "1", "--n", "3", "--no-oneshot",
        "--variants", "n64-b16-v64", "e2-n32-b16-v64",
        "--ref-epochs", "2", "--ref-samples", "320", "--ref-batch", "32", "--ref-val", "128",
        "--out", str(tmp_path), "--cache-dir", str(tmp_path / "cache"),
    ]  # fmt: skip
    assert eq.main(argv) == 0
    result = json.loads((tmp_path / "evaluator_quality-coatnet-s1.json").read_text())
    assert not result["partial"] and result["summary"]["reference"]["n"] == 3
    assert all(0 < row["reference"]["top1"] <= 100 for row in result["rows"])
