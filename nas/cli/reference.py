"""The options reference page, generated from the declarations: ``python -m nas.cli.reference`` writes
``docs/reference.md`` (a test holds the committed page equal to what this writes).

One table per command (``nas search``, ``nas train``, ``nas retrain``), one row per option: the flag, the
config file's key (search), the type, the default, the help; the same declarations make the command lines
(:mod:`nas.cli.options`) and the search config file's keys.
"""

from __future__ import annotations

import sys

from nas.cli.train_options import RetrainOptions, ScheduleOptions, TrainOptions
from nas.core.declare import declared
from nas.study.settings import SearchSettings

__all__ = ["reference_page"]


def _rows(cls: type, key: bool) -> list[str]:
    rows = []
    for name, (option, field) in declared(cls).items():
        flag = option.flag or f"--{name.replace('_', '-')}"
        shown = option.shown if option.shown is not None else ""
        cell = "flag" if field.type == "bool" else field.type.replace(" | ", " or ")
        config_key = f" `{name}` |" if key else ""
        rows.append(f"| `{flag}` |{config_key} {cell} | {shown} | {_cell(option.help)} |")
    return rows


def reference_page() -> str:
    """The Markdown page: every declared option of each command, in the order its ``--help`` lists them."""
    lines = [
        "# Command options",
        "",
        "Generated from the declarations in `nas/study/settings.py` (search) and `nas/cli/train_options.py`",
        "(train, retrain) by `python -m nas.cli.reference`; do not edit by hand.",
        "",
        "## `nas search`",
        "",
        "A YAML or TOML config file (`nas search --config FILE`) takes the same keys, at its top level or in",
        "a `search` section (dashes or underscores); flags override it.",
        "",
        "| flag | config key | type | default | what it does |",
        "| --- | --- | --- | --- | --- |",
        *_rows(SearchSettings, key=True),
        "| `--config` | | path | | YAML/TOML file with the same keys; flags override it. |",
        "",
        "## `nas train ARCH`",
        "",
        "ARCH: an arch.json file (or JSON text) of the architecture to train.",
        "",
        "| flag | type | default | what it does |",
        "| --- | --- | --- | --- |",
        *_rows(TrainOptions, key=False),
        *_rows(ScheduleOptions, key=False),
        "",
        "## `nas retrain STUDY`",
        "",
        "STUDY: a study name (under `--runs-dir`) or a run directory.",
        "",
        "| flag | type | default | what it does |",
        "| --- | --- | --- | --- |",
        *_rows(RetrainOptions, key=False),
        *_rows(ScheduleOptions, key=False),
        "",
    ]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    sys.stdout.write(reference_page())
