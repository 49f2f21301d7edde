"""Command-line options generated from declared fields (:mod:`nas.core.declare`).

Each option of ``nas search`` (:class:`~nas.study.settings.SearchSettings`), ``nas train`` and ``nas retrain``
(:mod:`nas.cli.train_options`) is declared once, as a dataclass field with its help. :func:`options_of` turns
every declared field of a class into a typer parameter (name, type, help with its ``[default: ...]``),
:func:`with_options` makes them a command's parameters, and :func:`given_options` / :func:`build` turn what
the command line gave back into the class's keywords.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from nas.core.declare import Declared, declared

__all__ = ["argument", "build", "config_option", "given_options", "options_of", "with_options"]

# the command line's type of a field, by its annotation (a declaration's ``cli`` overrides it)
_CLI_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


def _cli_type(annotation: str) -> Any:
    kinds = [kind for kind in annotation.split(" | ") if kind != "None"]
    return _CLI_TYPES.get(kinds[0], str) if len(kinds) == 1 else str


def options_of(cls: type, *, unset: bool = False) -> list[inspect.Parameter]:
    """One keyword parameter per declared field of ``cls``, in declaration order: a flag for a boolean (its
    ``flag``, else ``--name``), else an option. With ``unset``, an option not given is None (so that a config
    file's value stands where a flag is absent); else it is the field's default."""
    out = []
    for name, (option, field) in declared(cls).items():
        help_text = option.help + (f" \\[default: {option.shown}]" if option.shown is not None else "")
        kind = option.cli or _cli_type(field.type)
        if kind is bool:
            flag = option.flag or f"--{name.replace('_', '-')}"
            param = typer.Option(flag, help=help_text)
            out.append(_keyword(_flag_name(name, option), Annotated[bool, param], False))
        else:
            default = None if unset or field.default is dataclasses.MISSING else field.default
            option_type = Annotated[kind | None, typer.Option(help=help_text, show_default=False)]
            out.append(_keyword(name, option_type, default))
    return out


def given_options(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """The keywords of ``cls`` that a command line gave (a flag set, a value given, a list not empty), from
    the parameters of :func:`options_of` with ``unset``: a ``--no-NAME`` flag sets NAME false."""
    out = {}
    for name, (option, _) in declared(cls).items():
        value = values[_flag_name(name, option)]
        if value is None or value is False or value == []:
            continue
        out[name] = (not value) if option.flag else value
    return out


def build(cls: type, values: dict[str, Any]) -> Any:
    """``cls`` from every one of its declared options in ``values`` (the parameters of :func:`options_of`)."""
    out = {}
    for name, (option, _) in declared(cls).items():
        value = values[_flag_name(name, option)]
        out[name] = (not value) if option.flag else value
    return cls(**out)


def with_options(
    *classes: type,
    before: Sequence[inspect.Parameter] = (),
    after: Sequence[inspect.Parameter] = (),
    unset=False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command whose parameters are ``before`` (its arguments), the declared options of ``classes`` in
    turn (:func:`options_of`), then ``after``; the command receives them all as keywords."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        params = [*before, *(p for cls in classes for p in options_of(cls, unset=unset)), *after]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap


def argument(name: str, kind: Any, help_text: str) -> inspect.Parameter:
    """A command's positional argument."""
    annotation = Annotated[kind, typer.Argument(help=help_text)]
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation)


def _flag_name(name: str, option: Declared) -> str:
    """The parameter's name: ``no_baselines`` for ``--no-baselines``, else the field's."""
    return option.flag.removeprefix("--").replace("-", "_") if option.flag else name


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def config_option() -> inspect.Parameter:
    """``--config``: a YAML/TOML file of the same keys (:func:`nas.study.settings.load_config`)."""
    help_text = "YAML/TOML file with the same keys; flags override it."
    return _keyword("config", Annotated[Path | None, typer.Option(help=help_text)], None)
