"""MkDocs hook: the Results section, generated at build time from the committed benchmark files.

One page per folder of ``benchmarks/results/`` (listed, with what it measures and the script that writes it,
in ``benchmarks/results/README.md``): each JSON file at the folder's top and in its run sub-folders (never
``archive/`` or ``cache/``) rendered as tables of its figures and rows, and each PNG shown. No figure on these
pages is typed by hand, so a page and its source cannot disagree.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
SKIPPED = ("archive", "cache")
MAX_ROWS = 40  # rows of a list shown; the rest is in the file
MAX_COLUMNS = 12
_ROW = re.compile(r"^\| `(?P<folder>[^`/]+)/` \| (?P<what>.+?) \| (?P<headline>.+?) \| (?P<script>.+?) \|$")


def benchmarks() -> list[dict[str, str]]:
    """The index's rows: folder, what it measures, its headline files, the script that writes it."""
    rows = []
    for line in (RESULTS / "README.md").read_text().splitlines():
        match = _ROW.match(line)
        if match and (RESULTS / match["folder"]).is_dir():
            rows.append(match.groupdict())
    return rows


def _cell(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value)
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def _scalar(value: Any) -> bool:
    scalars = (str, int, float, bool, type(None))
    return isinstance(value, scalars) or (
        isinstance(value, list) and len(value) <= 10 and all(isinstance(v, scalars) for v in value)
    )


def _flat(data: dict[str, Any], prefix: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """The scalar figures of ``data`` by dotted key (nested mappings to depth 3; lists of records apart)."""
    out = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if _scalar(value):
            out.append((name, value))
        elif isinstance(value, dict) and depth < 3:
            out += _flat(value, f"{name}.", depth + 1)
    return out


def _records(data: Any, prefix: str = "") -> list[tuple[str, list[dict[str, Any]]]]:
    """Every list of records (mappings) in ``data``, by dotted key."""
    out = []
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                out.append((f"{prefix}{key}", value))
            elif isinstance(value, dict):
                out += _records(value, f"{prefix}{key}.")
    return out


def _table(records: list[dict[str, Any]]) -> list[str]:
    columns: list[str] = []
    for record in records:
        for key, value in record.items():
            if key not in columns and _scalar(value) and len(columns) < MAX_COLUMNS:
                columns.append(key)
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for record in records[:MAX_ROWS]:
        lines.append("| " + " | ".join(_cell(record.get(c, "")) for c in columns) + " |")
    if len(records) > MAX_ROWS:
        lines.append(f"\n{len(records) - MAX_ROWS} more rows in the file.")
    return lines


def _json_section(path: Path) -> list[str]:
    where = path.relative_to(ROOT)
    lines = [f"## `{path.relative_to(RESULTS / path.relative_to(RESULTS).parts[0])}`", ""]
    lines += [f"Source: `{where}`.", ""]
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        data = {"rows": data} if isinstance(data, list) else {"value": data}
    figures = _flat(data)
    if figures:
        lines += ["| field | value |", "| --- | --- |", *(f"| `{k}` | {_cell(v)} |" for k, v in figures), ""]
    for key, records in _records(data):
        lines += [f"**`{key}`** ({len(records)} rows)", "", *_table(records), ""]
    return lines


def _files(folder: Path) -> tuple[list[Path], list[Path]]:
    """The folder's JSON and PNG files: at its top and in its run sub-folders, not archive/ or cache/."""
    places = [folder, *(p for p in sorted(folder.iterdir()) if p.is_dir() and p.name not in SKIPPED)]
    found = [f for place in places for f in sorted(place.iterdir()) if f.is_file()]
    return [f for f in found if f.suffix == ".json"], [f for f in found if f.suffix == ".png"]


def page(entry: dict[str, str]) -> tuple[str, list[Path]]:
    """The Markdown of one benchmark's page, and the images it shows."""
    folder = RESULTS / entry["folder"]
    jsons, images = _files(folder)
    lines = [
        f"# {entry['folder']}",
        "",
        f"**What it measures:** {entry['what']}",
        "",
        f"**Written by:** {entry['script']} (under `benchmarks/`). **Headline:** {entry['headline']}.",
        "",
        f"Generated at build time from the committed files in `benchmarks/results/{entry['folder']}/`.",
        "",
    ]
    readme = folder / "README.md"
    if readme.is_file():
        lines += ['!!! note "The folder\'s README"', ""]
        lines += [
            f"    {line}" if line else ""
            for line in readme.read_text().splitlines()
            if not line.startswith("# ")
        ]
        lines.append("")
    for image in images:
        lines += [f"![{image.name}](img/{entry['folder']}/{image.relative_to(folder).as_posix()})", ""]
    for path in jsons:
        lines += _json_section(path)
    return "\n".join(lines), images


def index(entries: list[dict[str, str]]) -> str:
    lines = [
        "# Results",
        "",
        "Every benchmark and evidence study of the project, one page each, generated when this site is built",
        "from the files committed under `benchmarks/results/` (its `README.md` indexes them; superseded runs",
        "sit in each folder's `archive/`, not shown here). A figure on these pages is the file's own.",
        "",
        "| benchmark | what it measures |",
        "| --- | --- |",
        *(f"| [{e['folder']}]({e['folder']}.md) | {e['what']} |" for e in entries),
        "",
    ]
    return "\n".join(lines)


def on_config(config):
    entries = benchmarks()
    for item in config["nav"] or []:
        if isinstance(item, dict) and "Results" in item:
            item["Results"] = [
                "results/index.md",
                *({e["folder"]: f"results/{e['folder']}.md"} for e in entries),
            ]
    return config


def on_files(files, config):
    entries = benchmarks()
    files.append(File.generated(config, "results/index.md", content=index(entries)))
    for entry in entries:
        text, images = page(entry)
        files.append(File.generated(config, f"results/{entry['folder']}.md", content=text))
        for image in images:
            name = f"results/img/{entry['folder']}/{image.relative_to(RESULTS / entry['folder']).as_posix()}"
            files.append(File.generated(config, name, content=image.read_bytes()))
    return files
