"""The ONNX acceptance check shared by the export tests: a written ``model.onnx``, run with onnxruntime,
agrees with the PyTorch network on real validation images (max abs logit difference <= 1e-4 in fp32, the
same argmax)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from evaluators.batches import loaders
from evaluators.data import load_dataset

TOLERANCE = 1e-4


def validation_images(img_size: int, count: int = 16) -> torch.Tensor:
    """The first ``count`` Fashion-MNIST validation images at ``img_size``, normalised as in training."""
    split = load_dataset("fashion-mnist", img_size=img_size, seed=0)
    _, val = loaders(split, count, val_samples=count)
    images, _ = next(iter(val))
    return images.float()


def assert_onnx_agrees(model: torch.nn.Module, path: Path, images: torch.Tensor) -> float:
    """Run ``path`` with onnxruntime on ``images``; assert it agrees with ``model``; return the max abs
    difference of the logits."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (got,) = session.run(["logits"], {"image": images.numpy()})
    with torch.inference_mode():
        expected = model.eval()(images).numpy()
    assert got.dtype == np.float32 and got.shape == expected.shape
    diff = float(np.abs(got - expected).max())
    assert diff <= TOLERANCE, f"{path}: max abs logit difference {diff:.3g} > {TOLERANCE}"
    assert (got.argmax(1) == expected.argmax(1)).all(), f"{path}: argmax differs"
    return diff
