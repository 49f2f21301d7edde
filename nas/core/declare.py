"""Options declared once, as dataclass fields: each field's default and help sit together, and the command
line (:mod:`nas.cli.options`), the config file's keys and the reference page (:mod:`nas.cli.reference`) are
generated from them. :class:`~nas.study.settings.SearchSettings` declares ``nas search``'s options this way,
:class:`~evaluators.train.ScheduleOptions` the training schedule of ``nas train`` and ``nas retrain``, and
:mod:`nas.cli.train_options` the rest of those two commands'.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Declared", "declare", "declared"]


@dataclass(frozen=True)
class Declared:
    """An option's declaration beside its default: its help, the default as its help shows it (None: none
    shown), the flag that sets a boolean the other way (``--no-baselines``), and the type the command line
    reads it as where it differs from the field's (a list of files, text for a count or a size)."""

    help: str
    shown: str | None = None
    flag: str | None = None
    cli: Any = None


def declare(
    default: Any, help: str, *, shown: str | None = None, flag: str | None = None, cli: Any = None, **kw: Any
) -> Any:
    """An option's field, declared once: ``default`` (a callable: its factory) and the option's help; the
    help's ``[default: ...]`` is ``shown``, else the default itself (none for None, a bool or a factory)."""
    if shown is None and not callable(default) and default is not None and not isinstance(default, bool):
        shown = f"{default:g}" if isinstance(default, float) else str(default)
    metadata = {"option": Declared(help, shown, flag, cli)}
    if callable(default):
        return field(default_factory=default, metadata=metadata, **kw)
    return field(default=default, metadata=metadata, **kw)


def declared(cls: type) -> dict[str, tuple[Declared, dataclasses.Field]]:
    """Each declared option of the dataclass ``cls`` by field name, in the order they are declared, with its
    field (whose type and default the command line reads)."""
    return {f.name: (f.metadata["option"], f) for f in dataclasses.fields(cls) if "option" in f.metadata}
