"""Command-line options generated from the settings' declarations (:func:`nas.study.settings.declared`).

Each ``nas search`` option is declared once, as a :class:`~nas.study.settings.SearchSettings` field with its
help; :func:`settings_options` turns every declared field into a typer parameter (name, type, help with its
``[default: ...]``), and :func:`given_settings` turns what the command line gave back into settings keywords
(only the options given, so a config file's values stand where a flag is absent).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from nas.study.settings import SearchSettings, declared

__all__ = ["config_option", "given_settings", "settings_options", "with_options"]

# the command line's type of a setting, by its annotation (a declaration's ``cli`` overrides it)
_CLI_TYPES = {"str": str, "int": int, "float": float, "bool": bool}


def _cli_type(annotation: str) -> Any:
    kinds = [kind for kind in annotation.split(" | ") if kind != "None"]
    return _CLI_TYPES.get(kinds[0], str) if len(kinds) == 1 else str


def settings_options() -> list[inspect.Parameter]:
    """One keyword parameter per declared setting, in declaration order: a flag for a boolean (its
    ``flag``, else ``--name``), else an option whose value is unset (None) unless given."""
    types = {f.name: f.type for f in dataclasses.fields(SearchSettings)}
    out = []
    for name, option in declared().items():
        help_text = option.help + (f" \\[default: {option.shown}]" if option.shown is not None else "")
        kind = option.cli or _cli_type(types[name])
        if kind is bool:
            flag = option.flag or f"--{name.replace('_', '-')}"
            param = typer.Option(flag, help=help_text)
            out.append(_keyword(_flag_name(name, option.flag), Annotated[bool, param], False))
        else:
            out.append(_keyword(name, Annotated[kind | None, typer.Option(help=help_text)], None))
    return out


def given_settings(values: dict[str, Any]) -> dict[str, Any]:
    """The settings keywords of the options a command line gave (a flag set, a value given, a list not
    empty): a ``--no-NAME`` flag sets NAME false."""
    out = {}
    for name, option in declared().items():
        value = values[_flag_name(name, option.flag)]
        if value is None or value is False or value == []:
            continue
        out[name] = (not value) if option.flag else value
    return out


def with_options(*extra: inspect.Parameter) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A command whose parameters are the declared settings' options, then ``extra``; the command receives
    them all as keywords."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        params = [*settings_options(), *extra]
        command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params}
        return command

    return wrap


def _flag_name(name: str, flag: str | None) -> str:
    """The parameter's name: ``no_baselines`` for ``--no-baselines``, else the setting's."""
    return flag.removeprefix("--").replace("-", "_") if flag else name


def _keyword(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def config_option() -> inspect.Parameter:
    """``--config``: a YAML/TOML file of the same keys (:func:`nas.study.settings.load_config`)."""
    help_text = "YAML/TOML file with the same keys; flags override it."
    return _keyword("config", Annotated[Path | None, typer.Option(help=help_text)], None)
