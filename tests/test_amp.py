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


@pytest.mark.filterwarnings("ignore:.*CUDA is not available")  # the scaler disables itself here
def test_only_fp16_is_loss_scaled_and_autocast_runs_at_the_dtype() -> None:
    assert grad_scaler(torch.bfloat16) is None
    assert isinstance(grad_scaler(torch.float16), torch.amp.GradScaler)
    with autocast(torch.device("cpu"), torch.bfloat16):  # the CPU autocast honours the same context
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
