"""``create_model``: a network from an architecture in any form a user holds, optionally with its weights.

An architecture is an :class:`~nas.core.arch.Arch`, its flat dict, JSON text, or the path of a ``.json`` file
(``nas export`` writes ``arch.json``). A **model file** (``.pt``, written by :func:`save_model`, as
``nas export`` and ``nas train`` do) holds the network as built (arch, classes, input channels, image size)
and its weights; ``create_model(path)`` rebuilds and loads it: the network that was evaluated.

``import search_spaces.timm_models`` registers ``nas_arch`` with timm, so ``timm.create_model("nas_arch",
arch="arch.json", num_classes=10)`` builds the same network, and ``pretrained_cfg_overlay={"file":
"model.pt"}`` loads a model file's weights the timm way.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import torch

from nas.core import userfiles
from nas.core.arch import Arch
from nas.core.bounds import MAX_CLASSES, MAX_IN_CHANS, shown, whole
from nas.core.model import NasNet, build_model, check_task, img_size_pair

__all__ = [
    "FORMAT",
    "create_model",
    "load_model_file",
    "model_of_payload",
    "resolve_arch",
    "save_model",
    "weights_name",
]

FORMAT = "nas-hybrid-model/1"


def resolve_arch(arch: Arch | dict | str | Path) -> Arch:
    """An :class:`Arch` from itself, a flat dict, JSON text or a ``.json`` file; ValueError otherwise."""
    if isinstance(arch, Arch):
        return arch
    if isinstance(arch, dict):
        return Arch.from_flat(arch)
    text = str(arch)
    if text.lstrip().startswith("{"):
        return Arch.from_json(text)
    try:
        exists = Path(text).exists()
    except (OSError, ValueError):  # a name too long for a path, or holding a NUL byte
        exists = False
    if not exists:
        raise ValueError(f"arch: {shown(text)} is neither an architecture JSON nor an existing file")
    return Arch.load(text)  # ValueError naming the file: unreadable, not JSON, or not a valid architecture


def weights_name(arch: Arch) -> str:
    """The file name under which a search keeps the weights it evaluated for ``arch`` (by its key)."""
    return hashlib.sha1(arch.key.encode()).hexdigest()[:16] + ".pt"


def save_model(model: NasNet, path: str | Path, **meta: Any) -> Path:
    """Write ``model`` (built by :func:`~nas.core.model.build_model`) as a model file; ``meta`` is kept with
    it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "arch": model.arch.to_flat(),
        "num_classes": model.num_classes,
        "in_chans": model.in_chans,
        "img_size": list(model.img_size),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "meta": meta,
    }
    tmp = path.with_name(f".{path.name}.tmp")
    torch.save(payload, tmp)
    tmp.replace(path)  # atomic: a kill never leaves half a model file
    return path


def load_model_file(path: str | Path) -> dict[str, Any]:
    """The payload of a model file; ValueError in one sentence if it is not one."""
    userfiles.check_regular(path, "model file", max_bytes=None)  # torch.load would wait on a FIFO forever
    try:
        with warnings.catch_warnings():  # a foreign pickle's protocol is no news worth a warning line
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: torch raises several kinds
        raise ValueError(f"model file: cannot read {path} ({type(err).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"model file: {path} is not a model file of this project ({FORMAT})")
    problem = _payload_problem(payload)
    if problem is not None:
        raise ValueError(f"model file: {path} {problem}")
    return payload


def _payload_problem(payload: dict[str, Any]) -> str | None:
    """What is wrong with a model file's payload (of the right format), or None: its architecture, task sizes
    and state dict as :func:`save_model` writes them (whether the weights fit the network is
    :func:`model_of_payload`'s to say, as it loads them)."""
    try:
        Arch.from_flat(payload.get("arch"))
        check_task(payload.get("num_classes"), payload.get("in_chans"))
        img_size_pair(payload.get("img_size"))
    except ValueError as err:
        return f"records a network that cannot be built ({err})"
    state = payload.get("state_dict")
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        return "holds no state dict of named tensors"
    return None


def create_model(
    arch: Arch | dict | str | Path,
    num_classes: int | None = None,
    in_chans: int | None = None,
    img_size: int | tuple[int, int] | None = None,
    *,
    checkpoint: str | Path | None = None,
    drop_path_rate: float = 0.0,
    drop_rate: float = 0.0,
) -> NasNet:
    """Build the network of ``arch`` (or of a model file, with its weights).

    Given a model file, as ``arch`` or as ``checkpoint``, the network is built as the file says and its
    weights are loaded (strictly); a ``num_classes``, ``in_chans`` or ``img_size`` that contradicts the file
    is refused. Without one, the defaults are ImageNet's (1000 classes, 3 channels, 224 px).
    """
    for name, value, most in (
        ("num_classes", num_classes, MAX_CLASSES),
        ("in_chans", in_chans, MAX_IN_CHANS),
    ):
        if value is not None:
            whole(name, value, 1, most)
    if img_size is not None:
        img_size = img_size_pair(img_size)
    source = checkpoint
    if source is None and isinstance(arch, (str, Path)) and str(arch).endswith((".pt", ".pth")):
        source = arch
    if source is None:
        return build_model(
            resolve_arch(arch),
            num_classes=1000 if num_classes is None else num_classes,
            in_chans=3 if in_chans is None else in_chans,
            img_size=224 if img_size is None else _size(img_size),
            drop_path_rate=drop_path_rate,
            drop_rate=drop_rate,
        )
    payload = load_model_file(source)
    built = Arch.from_flat(payload["arch"])
    if not isinstance(arch, (str, Path)) or str(arch) != str(source):
        wanted = resolve_arch(arch)
        if wanted != built:
            raise ValueError(f"checkpoint: {source} holds {built.key}, not {wanted.key}")
    given = {"num_classes": num_classes, "in_chans": in_chans, "img_size": img_size}
    for name, value in given.items():
        stored = payload[name]
        if value is not None and _norm(value) != _norm(stored):
            raise ValueError(f"{name}: the model file was built with {stored}, not {value}")
    return model_of_payload(payload, drop_path_rate=drop_path_rate, drop_rate=drop_rate, source=source)


def model_of_payload(
    payload: dict[str, Any],
    *,
    drop_path_rate: float = 0.0,
    drop_rate: float = 0.0,
    source: str | Path | None = None,
) -> NasNet:
    """The network a model file's payload (:func:`load_model_file`) holds, with its weights (loaded strictly):
    for a caller that also reads the payload's other fields, so the file is read once. Weights that do not fit
    the network (a tensor's shape, a key missing or unknown) are a ValueError in one sentence naming the file
    ``source``."""
    model = build_model(
        Arch.from_flat(payload["arch"]),
        num_classes=payload["num_classes"],
        in_chans=payload["in_chans"],
        img_size=_size(payload["img_size"]),
        drop_path_rate=drop_path_rate,
        drop_rate=drop_rate,
    )
    try:
        model.load_state_dict(payload["state_dict"], strict=True)
    except RuntimeError as err:  # torch lists every mismatch, a line each: the first says what is wrong
        lines = [line.strip() for line in str(err).splitlines()[1:] if line.strip()] or [str(err).strip()]
        detail = lines[0] if len(lines[0]) <= 200 else lines[0][:197] + "..."
        more = f" and {len(lines) - 1} more" if len(lines) > 1 else ""
        name = f" {source}" if source is not None else ""
        raise ValueError(
            f"model file{name}: its weights do not fit the network it records ({detail}{more})"
        ) from None
    return model


def _size(value: int | tuple[int, int] | list[int]) -> int | tuple[int, int]:
    return value if isinstance(value, int) else (int(value[0]), int(value[1]))


def _norm(value: Any) -> Any:
    """An image size as a (height, width) pair, other values as they are."""
    if isinstance(value, (list, tuple)):
        return tuple(int(v) for v in value)
    return value
