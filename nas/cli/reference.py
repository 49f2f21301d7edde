"""The options reference page, generated from the settings' declarations: ``python -m nas.cli.reference``
writes ``docs/reference.md`` (a test holds the committed page equal to what this writes).

One row per ``nas search`` option: the flag, the config file's key, the type, the default, the help; the
same declarations make the command line (:mod:`nas.cli.options`) and the config file's keys.
"""

from __future__ import annotations

import dataclasses
import sys

from nas.study.settings import SearchSettings, declared

__all__ = ["reference_page"]


def reference_page() -> str:
    """The Markdown page: every declared search option, in the order `nas search --help` lists them."""
    types = {f.name: f.type for f in dataclasses.fields(SearchSettings)}
    rows = []
    for name, option in declared().items():
        flag = option.flag or f"--{name.replace('_', '-')}"
        shown = option.shown if option.shown is not None else ""
        is_flag = types[name] == "bool"
        cell = "flag" if is_flag else types[name].replace(" | ", " or ")
        rows.append(f"| `{flag}` | `{name}` | {cell} | {shown} | {_cell(option.help)} |")
    lines = [
        "# `nas search` options",
        "",
        "Generated from the declarations in `nas/study/settings.py` by `python -m nas.cli.reference`;",
        "do not edit by hand. A YAML or TOML config file (`nas search --config FILE`) takes the same keys,",
        "at its top level or in a `search` section (dashes or underscores); flags override it.",
        "",
        "| flag | config key | type | default | what it does |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "| `--config` | | path | | YAML/TOML file with the same keys; flags override it. |",
        "",
    ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    sys.stdout.write(reference_page())
