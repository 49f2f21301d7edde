"""timm registration: ``import search_spaces.timm_models`` and ``timm.create_model`` builds this project's
networks.

- ``nas_arch``: any architecture, ``timm.create_model("nas_arch", arch="arch.json", num_classes=10)``
  (``arch`` is anything :func:`nas.core.create.resolve_arch` takes); ``checkpoint_path="model.pt"`` (timm's
  own
  loader reads a model file's ``state_dict``) or ``pretrained=True, pretrained_cfg_overlay={"file":
  "model.pt"}`` (checked against the file's arch and shapes) loads a model file's weights.
- one entry per baseline of every search space, ``nas_<space>_<baseline>`` in lower case with ``-`` as
  ``_`` (``nas_coatnet_coatnet_0``, ``nas_sasa_resnet_26_full_attention``, ...): the papers' networks as
  reproduced inside the spaces (random initialisation; no pretrained weights exist for them); installed
  plugin spaces' too (``nas_isotropic_uniform_rel``), those that load.

Model files are this project's own format (:func:`nas.core.create.save_model`): a dict whose ``state_dict``
timm's
loader finds, and whose arch and shapes :func:`nas.core.create.create_model` checks.
"""

from __future__ import annotations

import re
from typing import Any

from timm.models import register_model

from nas.core.create import create_model
from nas.core.model import NasNet
from search_spaces import get_space, list_spaces

__all__ = ["baseline_entry_name"]


def _build(arch: Any, pretrained: bool, kwargs: dict[str, Any]) -> NasNet:
    overlay = kwargs.pop("pretrained_cfg_overlay", None) or {}
    for housekeeping in ("pretrained_cfg", "cache_dir"):  # timm's own, for hub downloads
        kwargs.pop(housekeeping, None)
    checkpoint = overlay.get("file") if pretrained else None
    if pretrained and checkpoint is None:
        raise ValueError("pretrained: give the model file as pretrained_cfg_overlay={'file': 'model.pt'}")
    allowed = {"num_classes", "in_chans", "img_size", "drop_path_rate", "drop_rate"}
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise ValueError(f"nas models take {', '.join(sorted(allowed))}; not {', '.join(unknown)}")
    return create_model(arch, checkpoint=checkpoint, **kwargs)


@register_model
def nas_arch(pretrained: bool = False, arch: Any = None, **kwargs: Any) -> NasNet:
    """Any architecture of this project: ``arch`` is an Arch, a flat dict, JSON text or a .json path."""
    if arch is None:
        raise ValueError("nas_arch needs arch=... (an Arch, its JSON, or the path of arch.json)")
    return _build(arch, pretrained, kwargs)


def baseline_entry_name(space: str, baseline: str) -> str:
    return "nas_" + re.sub(r"[^a-z0-9]+", "_", f"{space}_{baseline}".lower()).strip("_")


def _register_baselines() -> None:
    for space_name in list_spaces():
        try:
            space = get_space(space_name)
        except ValueError:  # an installed plugin that does not load: its sentence comes where it is named
            continue
        for name, baseline in space.baselines().items():
            entry = baseline_entry_name(space_name, name)

            def factory(pretrained: bool = False, _arch: Any = baseline.arch, **kwargs: Any) -> NasNet:
                return _build(_arch, pretrained, kwargs)

            factory.__name__ = factory.__qualname__ = entry
            factory.__module__ = __name__
            factory.__doc__ = f"{name} of the {space_name} space, as reproduced there."
            globals()[entry] = register_model(factory)


_register_baselines()
