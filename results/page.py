"""What the pages of :mod:`results` share: their style sheet, tables and atomic writes."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from nas.core.atomic import replaced

__all__ = ["CSS", "check_outputs", "html_table", "write_text"]

CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 24px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f0f0f0; }
pre { background: #f7f7f7; padding: 12px; font-size: 12px; overflow-x: auto; }
td.share { min-width: 90px; }
.arch-card { margin: 8px 0 18px; }
.arch-card:target { outline: 2px solid #d62728; outline-offset: 4px; }
.arch-card h3 { margin: 0 0 2px; font-size: 15px; }
.arch-card p { margin: 0 0 4px; font-size: 13px; }
.summary td:first-child { font-weight: 600; }
"""


def html_table(frame: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """``frame`` as an HTML table; a column named in ``links`` links each cell to ``#<prefix><value>``."""

    def cell(column: str, value: Any) -> str:
        if isinstance(value, float):
            text = "" if math.isnan(value) else f"{value:.4g}"
        else:
            text = html.escape(str(value if value is not None else ""))
        if links and column in links and text:
            return f"<a href='#{links[column]}{text}'>{text}</a>"
        return text

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(c, v)}</td>" for c, v in zip(frame.columns, row, strict=True)) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def write_text(path: Path, text: str) -> None:
    """``text`` into ``path``, whole or not at all (written beside it, then renamed over it); ValueError in
    one sentence where it cannot be written."""
    try:
        with replaced(path) as tmp:
            tmp.write_text(text)
    except OSError as err:
        raise ValueError(f"cannot write {path}: {err.strerror or err}") from None


def check_outputs(*paths: Path) -> None:
    """ValueError in one sentence if an output's path is a folder, before any of them is written (so a
    refused page leaves its earlier outputs as they were)."""
    for path in paths:
        if Path(path).is_dir():
            raise ValueError(f"cannot write {path}: it is a folder")
