"""The latency table: the parts of count, persisted and shared by processes, the memory-format rule, bad
files and devices refused in one sentence, and predictions near the measured network.

Everything runs on small images and proxy-shrunk networks with a single timed pass per part, so the file
stays fast; no assertion depends on how fast the machine is, except a loose factor against a measurement.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from benchmark_scripts import load_benchmark

from evaluators.complexity import _block_cost, clear_count_cache, count
from evaluators.latency import (
    _REFERENCES,
    MEMORY_FORMATS,
    LatencyTable,
    _parts,
    device_name,
    measured_latency_ms,
    whole_network_ms,
)
from nas.core.arch import Arch, Stage, Stem
from search_spaces import get_space, list_spaces

IMG = 32  # the smallest image every baseline runs at (total stride 32)
BASELINES = [(space, name) for space in list_spaces() for name in get_space(space).baselines()]
FIRST_BASELINE = {space: next(iter(get_space(space).baselines())) for space in list_spaces()}


def _full(space: str, name: str) -> Arch:
    """A baseline of ``space`` at full width: its parts share nothing with the calibration networks."""
    return get_space(space).baselines()[name].arch


def _small(space: str, name: str) -> Arch:
    """A baseline (or ``seed<n>``: a random sample) of ``space``, shrunk by its CPU proxy profile."""
    sp = get_space(space)
    arch = sp.sample_random(int(name[4:])) if name.startswith("seed") else sp.baselines()[name].arch
    return sp.profile("cpu").apply(arch)


def _table(root: Path | str, **kwargs) -> LatencyTable:
    """A CPU table that times each part once after one warm-up pass: the numbers are rough, the
    bookkeeping under test is not."""
    settings = {"threads": 1, "warmup": 1, "repeats": 1, "seconds": 0.0, **kwargs}
    return LatencyTable("cpu", root=root, **settings)


# --- the decomposition is count's ----------------------------------------------------------------


CASES = BASELINES + [(space, f"seed{seed}") for space in list_spaces() for seed in range(2)]


@pytest.mark.parametrize(("space", "name"), CASES, ids=[f"{s}:{n}" for s, n in CASES])
def test_parts_are_counts_parts_with_one_entry_per_distinct_block(space: str, name: str) -> None:
    from evaluators.latency import _parts  # the decomposition itself: what predict looks up

    arch = _small(space, name)
    clear_count_cache()
    cost = count(arch, img_size=IMG)
    parts = _parts(arch, IMG, 3, 1000)
    assert list(dict.fromkeys(p.name for p in parts)) == [p.name for p in cost.parts]
    assert len(parts) == arch.depth + 2  # the stem, every block (repeats too), the head
    blocks = {p.key for p in parts if p.key.startswith("block ")}
    assert len(blocks) == _block_cost.cache_info().misses  # count traced exactly these distinct blocks


@pytest.mark.parametrize("space", list_spaces())
def test_a_cold_table_measures_each_distinct_part_once_and_a_reloaded_one_nothing(
    space: str, tmp_path: Path
) -> None:
    arch = _full(space, FIRST_BASELINE[space])
    clear_count_cache()
    count(arch, img_size=IMG)
    distinct_blocks = _block_cost.cache_info().misses

    # the calibration networks (width 16) share no part with a full coatnet or sasa baseline; a micro
    # network is as narrow, and the parts it shares with them (its conv stem, an mbconv) are known already
    calibrated = {p.key for reference in _REFERENCES for p in _parts(reference, IMG, 3, 1000)}
    shared = len({p.key for p in _parts(arch, IMG, 3, 1000)} & calibrated)
    assert shared == 0 or space == "micro"
    table = _table(tmp_path)
    table.overhead_ms(IMG)
    before = table.measurements
    first = table.estimate(arch, IMG)
    assert table.measurements - before == 1 + distinct_blocks + 1 - shared  # stem, distinct blocks, head
    assert table.predict(arch, IMG) == first.ms
    assert table.measurements - before == 1 + distinct_blocks + 1 - shared  # known now: nothing measured

    reloaded = _table(tmp_path)
    assert reloaded.estimate(arch, IMG) == first  # the same numbers, from the file
    assert reloaded.measurements == 0
    assert [name for name, _ in reloaded.parts_ms(arch, IMG)] == [p.name for p in count(arch, IMG).parts]


def test_predict_is_the_sum_of_the_parts_plus_the_overhead(tmp_path: Path) -> None:
    table = _table(tmp_path)
    arch = _small("coatnet", "CoAtNet-0")
    estimate = table.estimate(arch, IMG)
    overhead = table.overhead_ms(IMG)[estimate.memory_format]
    parts = table.parts_ms(arch, IMG)
    assert table.predict(arch, IMG) == pytest.approx(sum(ms for _, ms in parts) + overhead, rel=1e-12)
    assert estimate.ms == min(ms for _, ms in estimate.by_format)
    assert all(ms > 0 for _, ms in parts)


def test_an_overhead_calibrated_under_load_never_makes_a_prediction_negative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts timed while another process held the cores (here: each part 100 ms, each whole reference
    network 1 ms) give a gap of about -100 ms per part; the overhead stops at minus the fastest reference."""
    import evaluators.latency as latency

    monkeypatch.setattr(latency, "_both_formats_ms", lambda *a, **k: dict.fromkeys(MEMORY_FORMATS, 100.0))
    monkeypatch.setattr(latency, "whole_network_ms", lambda *a, **k: dict.fromkeys(MEMORY_FORMATS, 1.0))
    table = _table(tmp_path)
    assert table.overhead_ms(IMG) == dict.fromkeys(MEMORY_FORMATS, -1.0)
    assert table.predict(_small("sasa", FIRST_BASELINE["sasa"]), IMG) > 0


def test_entries_are_keyed_by_batch_and_image_size(tmp_path: Path) -> None:
    arch = _small("sasa", FIRST_BASELINE["sasa"])
    _table(tmp_path).predict(arch, IMG)
    _table(tmp_path, batch=2).predict(arch, 64)
    document = json.loads(_table(tmp_path).path.read_text())
    assert set(document["entries"]) == {"batch1", "batch2"}
    assert set(document["entries"]["batch1"]) == {f"{IMG}px"}
    assert set(document["entries"]["batch2"]) == {"64px"}
    assert document["device"] == device_name("cpu") and document["threads"] == 1
    assert document["torch"] == torch.__version__
    assert _table(tmp_path, batch=2).predict(arch, 64) > 0


# --- memory format --------------------------------------------------------------------------------


def test_the_format_is_chosen_for_the_whole_network_not_per_part(tmp_path: Path) -> None:
    """With the stem 10x faster in channels-last and every other part 1.5x slower, a per-part choice would
    mix formats; the table must predict the faster of the two whole-network sums."""
    arch = _full("coatnet", "CoAtNet-0")  # stem conv64: not the calibration networks' stem
    table = _table(tmp_path)
    table.predict(arch, IMG)
    document = json.loads(table.path.read_text())
    slot = document["entries"]["batch1"][f"{IMG}px"]
    stem_key = next(key for key in slot["parts_ms"] if key.startswith("stem kind=conv width=64 "))
    for key in slot["parts_ms"]:
        slot["parts_ms"][key] = {"contiguous": 1.0, "channels_last": 1.5}
    slot["parts_ms"][stem_key] = {"contiguous": 10.0, "channels_last": 1.0}
    slot["overhead_ms"] = {"contiguous": 0.25, "channels_last": 0.5}
    table.path.write_text(json.dumps(document))

    rest = arch.depth + 1  # every block and the head
    contiguous, channels_last = 10.0 + rest + 0.25, 1.0 + 1.5 * rest + 0.5
    estimate = _table(tmp_path).estimate(arch, IMG)
    assert dict(estimate.by_format) == pytest.approx(
        {"contiguous": contiguous, "channels_last": channels_last}
    )
    assert estimate.ms == pytest.approx(min(contiguous, channels_last))
    assert estimate.memory_format == min(
        ("contiguous", "channels_last"), key=lambda f: dict(estimate.by_format)[f]
    )
    assert estimate.ms != pytest.approx(1.0 + rest + 0.25)  # what a per-part mix would say


def test_the_whole_network_is_timed_in_both_formats(tmp_path: Path) -> None:
    arch = _small("sasa", FIRST_BASELINE["sasa"])
    times = whole_network_ms(arch, IMG, threads=1, warmup=1, repeats=1, seconds=0.0)
    assert set(times) == set(MEMORY_FORMATS) and all(ms > 0 for ms in times.values())


@pytest.mark.parametrize("space", list_spaces())
def test_prediction_is_within_a_loose_factor_of_the_measured_network(
    space: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loose on purpose: bench_latency.py measures the real error. Parts and network are timed by this
    thread's CPU clock (one thread computes them), so other processes on a busy machine, which stretch the
    wall time of some passes and not others, do not decide the outcome."""
    import evaluators.latency as latency

    monkeypatch.setattr(latency, "time", SimpleNamespace(perf_counter=time.thread_time))
    arch = _small(space, FIRST_BASELINE[space])
    predicted = _table(tmp_path, repeats=3).predict(arch, 64)
    measured = measured_latency_ms(arch, 64, threads=1, warmup=1, repeats=3, seconds=0.0)
    assert measured / 3 < predicted < 3 * measured


# --- sharing the file -----------------------------------------------------------------------------


def test_two_tables_loaded_before_either_saves_keep_both_entries(tmp_path: Path) -> None:
    coatnet, sasa = _small("coatnet", FIRST_BASELINE["coatnet"]), _small("sasa", FIRST_BASELINE["sasa"])
    first, second = _table(tmp_path), _table(tmp_path)  # both read the (absent) file now
    first.predict(coatnet, IMG)
    second.predict(sasa, IMG)  # saves last: must merge, not overwrite, what first saved
    third = _table(tmp_path)
    third.predict(coatnet, IMG)
    third.predict(sasa, IMG)
    assert third.measurements == 0


def _predict_in_a_process(root: str, space: str, names: list[str], barrier) -> None:
    table = _table(root)
    barrier.wait()  # both processes have read the file before either writes
    for name in names:
        table.predict(_small(space, name), IMG)


def test_concurrent_writers_in_two_processes_keep_each_others_entries(tmp_path: Path) -> None:
    work = {space: [*list(get_space(space).baselines())[:2], "seed0"] for space in list_spaces()}
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(work))
    processes = [
        context.Process(target=_predict_in_a_process, args=(str(tmp_path), space, names, barrier))
        for space, names in work.items()
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=600)
    assert [p.exitcode for p in processes] == [0] * len(processes)
    table = _table(tmp_path)
    for space, names in work.items():
        for name in names:
            table.predict(_small(space, name), IMG)
    assert table.measurements == 0


# --- bad input --------------------------------------------------------------------------------------


def _document(tmp_path: Path, **changes) -> str:
    table = _table(tmp_path)
    base = {"format": "nas-latency-table", "version": 1, "device_id": table.device_id, "entries": {}}
    return json.dumps({**base, **changes})


BAD_FILES = {
    "not json": lambda tmp: '{"format": "nas-latency-table", ',
    "not a table": lambda tmp: "[1, 2, 3]",
    "another table": lambda tmp: json.dumps({"format": "something else"}),
    "another device": lambda tmp: _document(tmp, device_id="cuda-some-gpu-torch2.0-8threads"),
    "another version": lambda tmp: _document(tmp, version=99),
    "negative time": lambda tmp: _document(
        tmp, entries={"batch1": {"32px": {"parts_ms": {"x": {"contiguous": -1, "channels_last": 1}}}}}
    ),
    "missing format": lambda tmp: _document(
        tmp, entries={"batch1": {"32px": {"overhead_ms": {"contiguous": 0.1}}}}
    ),
    "odd slot": lambda tmp: _document(tmp, entries={"batch1": {"huge": {}}}),
    "deep": lambda tmp: "[" * 100_000 + "]" * 100_000,  # past json's recursion: a RecursionError before
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_corrupt_or_foreign_file_is_refused_in_one_sentence_naming_it(case: str, tmp_path: Path) -> None:
    path = _table(tmp_path).path
    path.write_text(BAD_FILES[case](tmp_path))
    with pytest.raises(ValueError) as err:
        _table(tmp_path)
    message = str(err.value)
    assert str(path) in message
    # short beside the path, whose length is the machine's (pytest's numbered temporary folders grow)
    assert "\n" not in message and len(message.replace(str(path), "<path>")) < 300
    assert err.value.__cause__ is None  # no json traceback chained to it


def test_a_damaged_file_met_while_saving_is_refused_too(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.path.write_text("garbage")
    with pytest.raises(ValueError, match="not valid JSON"):
        table.predict(_small("sasa", FIRST_BASELINE["sasa"]), IMG)


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu0", "meta", "", "cuda:99"])
def test_a_bad_device_is_refused_in_one_sentence(device: str, tmp_path: Path) -> None:
    if device == "cuda:99" and torch.cuda.device_count() > 99:
        pytest.skip("this machine has 100 GPUs")
    with pytest.raises(ValueError, match=r"^device: [^\n]*$"):
        LatencyTable(device, root=tmp_path)
    with pytest.raises(ValueError, match=r"^device: "):
        measured_latency_ms(_small("sasa", FIRST_BASELINE["sasa"]), IMG, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present")
def test_cuda_without_a_gpu_is_refused_in_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^device: 'cuda' asks for CUDA, which this machine does not have$"):
        LatencyTable("cuda", root=tmp_path)


@pytest.mark.parametrize(
    "settings", [{"batch": 0}, {"batch": True}, {"threads": 0}, {"repeats": 0}, {"seconds": -1.0}]
)
def test_bad_settings_are_refused(settings: dict, tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        _table(tmp_path, **settings)


@pytest.mark.parametrize("img_size", [(32, 32), 0, 16])
def test_a_bad_image_size_is_refused_in_one_sentence(img_size, tmp_path: Path) -> None:
    arch = _full("sasa", FIRST_BASELINE["sasa"])  # total stride 32
    with pytest.raises(ValueError, match=r"^[^\n]*(img_size|image size)[^\n]*$"):
        _table(tmp_path).predict(arch, img_size)


def test_other_ops_code_is_another_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import nas.core.ops
    from evaluators import latency

    table = _table(tmp_path)
    assert f"-ops{latency._ops_code()}-" in table.device_id
    ops = tmp_path / "ops"
    shutil.copytree(Path(nas.core.ops.__file__).parent, ops)
    monkeypatch.setattr(nas.core.ops, "__file__", str(ops / "__init__.py"))
    latency._ops_code.cache_clear()
    try:
        assert _table(tmp_path).device_id == table.device_id  # the same code, byte for byte
        local = ops / "local_attention.py"
        local.write_text(local.read_text() + "\n# a faster kernel\n")
        latency._ops_code.cache_clear()
        other = _table(tmp_path)
        assert other.device_id != table.device_id and other.path != table.path
    finally:
        latency._ops_code.cache_clear()


# --- measuring leaves the caller's state alone ------------------------------------------------------


def test_measuring_restores_threads_and_leaves_the_random_stream_alone(tmp_path: Path) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        table = _table(tmp_path, threads=1)
        assert table.device_id.startswith("cpu-") and table.device_id.endswith("-1threads")
        torch.manual_seed(123)
        table.predict(_small("sasa", FIRST_BASELINE["sasa"]), IMG)
        drawn = torch.rand(4)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    torch.manual_seed(123)
    assert torch.equal(drawn, torch.rand(4))


def test_training_after_a_measurement_in_the_same_process(tmp_path: Path) -> None:
    """Parts built under inference mode fill the attention ops' caches (relative indices, local-attention
    masks); a network trained afterwards in the same process (a search measures latency, then trains)
    must not meet those tensors: autograd cannot save inference tensors."""
    from nas.core.model import build_model
    from nas.core.ops.local_attention import _geometry
    from nas.core.ops.rel_attention import _head_relative_index, relative_index

    for cache in (_geometry, _head_relative_index, relative_index):
        cache.cache_clear()
    arch = Arch(
        Stem("conv", 16), (Stage("transformer", "rel", 1, 32), Stage("transformer", "local", 1, 32, k=3))
    )
    _table(tmp_path).predict(arch, IMG)
    model = build_model(arch, num_classes=10, img_size=IMG)
    model(torch.randn(2, 3, IMG, IMG)).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is present")
def test_the_latency_benchmark_refuses_a_missing_device_in_one_sentence(capsys) -> None:
    bench = load_benchmark("bench_latency")
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--devices", "cpu", "cuda:0"])
    assert exit_info.value.code == 2
    assert "--devices: 'cuda:0' asks for CUDA, which this machine does not have" in capsys.readouterr().err
