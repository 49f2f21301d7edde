"""evaluators.amp: full precision off CUDA, a loss scaler only for fp16."""

from __future__ import annotations

import pytest
import torch

from evaluators.amp import amp_dtype, autocast, grad_scaler


def test_cpu_trains_in_full_precision() -> None:
    cpu = torch.device("cpu")
    assert amp_dtype(cpu) is None and grad_scaler(None) is None
    with autocast(cpu, None):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


@pytest.mark.parametrize(
    ("capability", "dtype"),
    [((7, 0), torch.float16), ((7, 5), torch.float16), ((8, 0), torch.bfloat16), ((9, 0), torch.bfloat16)],
)
def test_bf16_only_where_the_training_gpu_computes_it(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], dtype: torch.dtype
) -> None:
    """A V100 (7.0) or T4 (7.5) emulates bf16, which ``torch.cuda.is_bf16_supported()`` also counts: fp16
    with a loss scaler there. Asked of the device trained on (cuda:1 here), not of the current one."""
    asked = []

    def of(device: torch.device) -> tuple[int, int]:
        asked.append(torch.device(device))
        return capability if torch.device(device).index == 1 else (6, 0)

    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", of)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    assert amp_dtype(torch.device("cuda", 1)) == dtype
    assert asked == [torch.device("cuda", 1)]


@pytest.mark.filterwarnings("ignore:.*CUDA is not available")  # the scaler disables itself here
def test_only_fp16_is_loss_scaled_and_autocast_runs_at_the_dtype() -> None:
    assert grad_scaler(torch.bfloat16) is None
    assert isinstance(grad_scaler(torch.float16), torch.amp.GradScaler)
    with autocast(torch.device("cpu"), torch.bfloat16):  # the CPU autocast honours the same context
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
