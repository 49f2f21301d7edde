"""MkDocs hook: the command-line reference, generated from the commands themselves at build time.

``docs/reference/cli.md`` holds the marker ``<!-- nas-cli -->``; it is replaced by ``nas --help`` and each
command's ``--help``, as typer prints them, so the page cannot disagree with the command line.
"""

from __future__ import annotations

import typer
from typer.testing import CliRunner

MARKER = "<!-- nas-cli -->"
_ENV = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}


def _help(app: typer.Typer, args: list[str]) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env=_ENV)
    if result.exit_code != 0:
        raise RuntimeError(f"nas {' '.join(args)} --help failed: {result.output[-500:]}")
    return "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines())


def cli_reference() -> str:
    """Markdown: the overview, then one section per command in the order `nas --help` lists them."""
    from nas.cli.commands import app

    group = typer.main.get_command(app)
    names = group.list_commands(None)  # type: ignore[arg-type]
    parts = ["```text", _help(app, []), "```", ""]
    for name in names:
        parts += [f"## `nas {name}`", "", "```text", _help(app, [name]), "```", ""]
    return "\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, cli_reference())
    return markdown
