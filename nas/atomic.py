"""Files replaced atomically, safe with several writers: every file a run writes (trials table, report,
manifest, checkpoints) is written beside its target under a name of this process's own and renamed over it,
so a kill never leaves half a file and workers sharing a run directory never rename each other's."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["replaced"]


@contextmanager
def replaced(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path (same folder and suffix) to write; on success it replaces ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp{path.suffix}")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
