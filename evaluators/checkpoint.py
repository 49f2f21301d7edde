"""Training checkpoints are data, never code: the one writer and the one reader of every trainer's checkpoint.

A checkpoint is a dict of tensors and plain values (numbers, strings, None, and lists, tuples and dicts of
them): model, optimizer and grad-scaler state dicts, torch generator states as the byte tensors
``get_state()`` returns, Python ``random``'s state as the tuple of ints ``getstate()`` returns.
:func:`save_checkpoint` writes one atomically (:func:`nas.core.atomic.replaced`); :func:`load_checkpoint`
reads it
with ``torch.load(weights_only=True)``, whose unpickler builds only those types and calls no function the
file names, so a crafted file cannot run code (DESIGN: no user-reachable file is unpickled).

Whatever is not such a checkpoint (garbage or truncated bytes, a pickle of any other class or function, a
dict lacking a key the trainer needs, a state that does not fit the network being resumed) is refused by a
ValueError in one sentence naming the file, which the CLI prints with exit code 2; the file is left as it is.
"""

from __future__ import annotations

import pickle
import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from nas.core.atomic import replaced

__all__ = ["load_checkpoint", "restoring", "save_checkpoint"]

_DETAIL = 200  # characters of a refused state's error kept in the sentence


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` (tensors and plain values only) to ``path`` atomically: a kill never leaves half a
    checkpoint."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | Path, keys: Iterable[str], remedy: str = "") -> dict[str, Any]:
    """The checkpoint at ``path``, its tensors on the CPU (a state is moved where it is loaded into; generator
    states must stay there), holding every one of ``keys``. Anything else raises ValueError in one sentence
    naming the file and ending with ``remedy`` (what the user can do)."""
    path = Path(path)
    tail = f"; {remedy}" if remedy else ""
    try:
        # a foreign pickle's protocol is no news worth a warning: the file is refused or read all the same
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise ValueError(f"checkpoint {path} does not exist{tail}") from None
    except pickle.UnpicklingError as err:
        # the weights-only unpickler builds no global the file names (a class, a function to call): a pickle
        # made to run code names one; anything else it cannot parse is not a checkpoint at all
        named = re.search(r"Unsupported global: GLOBAL (\S+)", str(err))
        if named:
            raise ValueError(
                f"checkpoint {path} was refused: it names {named.group(1)}, not only tensors and plain "
                f"values, and loading it could run code{tail}"
            ) from None
        raise ValueError(
            f"checkpoint {path} cannot be read: it is not a PyTorch checkpoint of tensors and plain values "
            f"(corrupt, truncated or another format){tail}"
        ) from None
    except Exception as err:  # a zip archive torch cannot read, an empty file, a folder: torch raises several
        raise ValueError(
            f"checkpoint {path} cannot be read as a PyTorch checkpoint ({type(err).__name__}){tail}"
        ) from None
    if not isinstance(state, dict):
        raise ValueError(f"checkpoint {path} holds a {type(state).__name__}, not a checkpoint's dict{tail}")
    missing = [key for key in keys if key not in state]
    if missing:
        raise ValueError(
            f"checkpoint {path} lacks {', '.join(map(repr, missing))}, so this trainer did not write it{tail}"
        )
    return state


@contextmanager
def restoring(path: str | Path, remedy: str = "") -> Iterator[None]:
    """Load a checkpoint's states into the live run inside this block: a state that does not fit it (another
    network's weights, a hand-edited value) is refused by a ValueError in one sentence naming the file."""
    try:
        yield
    except (AttributeError, IndexError, KeyError, RuntimeError, TypeError, ValueError) as err:
        # load_state_dict lists each missing, unexpected and misshapen key on a line: one line, cut short
        detail = " ".join(str(err).split()) or type(err).__name__
        if len(detail) > _DETAIL:
            detail = detail[: _DETAIL - 3] + "..."
        tail = f"; {remedy}" if remedy else ""
        raise ValueError(f"checkpoint {path} does not fit this run ({detail}){tail}") from None
