"""Token mixers, blocks and stems: small single-purpose modules on NCHW maps, one family per file.

Importing this package fills the three registries (``MIXERS``, ``BLOCKS``, ``STEMS``) whose names are the
vocabulary of :mod:`nas.core.arch`. Ops never import model code.
"""

from nas.core.ops import (  # noqa: F401  (imported for their registrations)
    attention_stem,
    bottleneck,
    conv_mixer,
    external_attention,
    local_attention,
    mbconv,
    rel_attention,
    stems,
    transformer,
)
from nas.core.ops._layers import standalone_trace
from nas.core.ops.registry import BLOCKS, MIXERS, STEMS, MixerCfg, Registry

__all__ = ["BLOCKS", "MIXERS", "STEMS", "MixerCfg", "Registry", "standalone_trace"]
