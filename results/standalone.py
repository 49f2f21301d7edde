"""Standalone files of a built network, for use without this package: ``nas export --format``.

- ``export`` (the default): ``model.pt2``, a ``torch.export`` program (``torch.export.load(path).module()``);
- ``onnx``: ``model.onnx`` for ONNX opset :data:`ONNX_OPSET` (``torch.onnx.export``, its dynamo exporter),
  for onnxruntime and other ONNX runtimes; needs the ``onnx`` extra (``pip install 'nas-hybrid[onnx]'``);
- ``torchscript``: ``model.torchscript.pt`` (``torch.jit.trace``, deprecated by torch), for runtimes that
  still load TorchScript.

All are traced at the image size the network was built for (``model.img_size``); ``model.pt2`` and
``model.onnx`` leave the batch size free and hold standard ops only: while ``torch.export`` traces, the
local-attention mixer computes its naive form (:func:`nas.core.ops.local_attention.dense_local_attention`)
instead of this package's custom kernel, so neither needs this package to run. ``torch.jit.trace`` gets the
same naive form under :func:`nas.core.ops.standalone_trace` (a trace that recorded the kernel,
``nas::local_attention``, would not load without ``import nas``), so a TorchScript file holds standard ops
too. ONNX files carry their opset, the architecture and the task sizes in their metadata
(:func:`onnx_metadata`), and the input's normalisation when the model file records it (a search's and ``nas
train``'s do). The input is a float32 ``(batch, in_chans, H, W)`` image batch
normalised as in training, ``(image / 255 - mean) / std`` with the dataset's per-channel mean and std; the
output is the logits.
"""

from __future__ import annotations

import importlib.util
import json
import re
import warnings
from pathlib import Path
from typing import Any

import torch

from nas.core.model import NasNet
from nas.core.ops import standalone_trace

__all__ = ["FILES", "ONNX_OPSET", "check_format", "onnx_metadata", "write_standalone"]

FILES = {"export": "model.pt2", "onnx": "model.onnx", "torchscript": "model.torchscript.pt"}
ONNX_OPSET = 20  # every op of every mixer, stem and head has an ONNX form at this opset (tests/test_onnx.py)
_ONNX_PACKAGES = ("onnx", "onnxscript")  # torch.onnx's dynamo exporter needs both


def check_format(fmt: str) -> None:
    """ValueError in one sentence unless ``fmt`` is a standalone format (or ``none``) this install can
    write."""
    if fmt != "none" and fmt not in FILES:
        raise ValueError(f"format: unknown {fmt!r}; allowed: {', '.join([*FILES, 'none'])}")
    missing = [name for name in _ONNX_PACKAGES if importlib.util.find_spec(name) is None]
    if fmt == "onnx" and missing:
        raise ValueError(
            f"format: onnx needs the package{'s' if len(missing) > 1 else ''} {' and '.join(missing)}; "
            "install them with pip install 'nas-hybrid[onnx]'"
        )


def write_standalone(
    model: NasNet, folder: str | Path, fmt: str, normalization: dict[str, Any] | None = None
) -> list[Path]:
    """Write ``model`` (in eval mode) as a ``fmt`` file into ``folder``; returns the files written (an ONNX
    model over 2 GiB keeps its weights in a ``.data`` file beside it). ``normalization`` (the model file's
    ``mean`` and ``std``, when it has them) goes into an ONNX file's metadata."""
    check_format(fmt)
    if fmt == "none":
        return []
    path = Path(folder) / FILES[fmt]
    model = model.eval()
    example = torch.randn(2, model.in_chans, *model.img_size)  # 2: a batch of 1 would be specialised
    if fmt == "torchscript":
        with torch.no_grad(), warnings.catch_warnings():
            # the user chose TorchScript: torch's deprecation notice and the tracer's notes on the
            # shape checks (constant at the fixed image size a traced file runs at) are not news to them
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.jit")
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            with standalone_trace():  # the attention ops' standard form, as under torch.export
                torch.jit.trace(model, example, check_trace=False).save(str(path))
        return [path]
    batch = {0: torch.export.Dim("batch")}
    if fmt == "export":
        torch.export.save(torch.export.export(model, (example,), dynamic_shapes=(batch,)), str(path))
        return [path]
    return _write_onnx(model, example, batch, path, normalization)


def onnx_metadata(model: NasNet, normalization: dict[str, Any] | None = None) -> dict[str, str]:
    """What an ONNX file of ``model`` says about itself (its ``metadata_props``): with ``normalization``,
    the per-channel ``mean`` and ``std`` (JSON lists, [0, 1] scale) its input is normalised with."""
    height, width = model.img_size
    stats = _stats(normalization or {}, model.in_chans)
    how = (
        f"(image / 255 - mean) / std with mean {stats['mean']} and std {stats['std']}"
        if stats
        else "normalised as in training"
    )
    return {
        **stats,
        "opset": str(ONNX_OPSET),
        "arch": model.arch.key,
        "arch_json": model.arch.to_json(),
        "num_classes": str(model.num_classes),
        "in_chans": str(model.in_chans),
        "img_size": json.dumps([height, width]),
        "input": f"image: float32 (batch, {model.in_chans}, {height}, {width}), {how}",
        "output": f"logits: float32 (batch, {model.num_classes})",
    }


def _stats(normalization: dict[str, Any], chans: int) -> dict[str, str]:
    """``mean`` and ``std`` as JSON lists, both or neither: only where each is one number per input
    channel (a model file's meta is data, and half a normalisation would mislead a deployer)."""
    out = {}
    for name in ("mean", "std"):
        values = normalization.get(name)
        numbers = isinstance(values, (list, tuple)) and len(values) == chans
        if not numbers or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return {}
        out[name] = json.dumps([float(v) for v in values])
    return out


def _write_onnx(
    model: NasNet, example: torch.Tensor, batch: dict, path: Path, normalization: dict[str, Any] | None
) -> list[Path]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on its own internals, not the user's input
            program = torch.onnx.export(
                model,
                (example,),
                dynamo=True,
                opset_version=ONNX_OPSET,
                dynamic_shapes=(batch,),
                input_names=["image"],
                output_names=["logits"],
                verbose=False,
            )
    except torch.onnx.errors.OnnxExporterError as err:
        raise ValueError(
            f"format: ONNX opset {ONNX_OPSET} cannot express {model.arch.key} ({_why(err)})"
        ) from None
    program.model.metadata_props.update(onnx_metadata(model, normalization))
    before = set(path.parent.iterdir())
    program.save(str(path))
    return sorted(set(path.parent.iterdir()) - before)


def _why(err: BaseException) -> str:
    """The exporter's innermost reason, in a few words: the op with no ONNX form where that is it."""
    while err.__cause__ is not None:
        err = err.__cause__
    text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    op = re.search(r"No ONNX function found for <OpOverload\(op='([^']+)'", text)
    return f"the op {op.group(1)} has no ONNX form" if op else text
