"""The README's and the documentation's snippets, checked against the code; the README's and the Getting
started page's run as written after ``make demo``.

Every fenced ``bash`` and ``python`` block of README.md and of each page under docs/ is read in order. A bash
line may say, in its comment, what it needs beyond this machine and a few minutes: ``[needs: gpu]``,
``[needs: cluster]``, ``[needs: postgres]``, ``[needs: browser]`` (a server that runs until stopped),
``[needs: minutes]`` or ``[needs: install]`` (a package installed into the environment, or what needs one);
the README's first block (``make demo`` / ``make test``) is the set-up.

- The default run checks every snippet against the code without running it: each ``nas`` line names a command
  and options that exist, each file it names under ``examples/`` is there, each Python block compiles and
  imports only names that exist.
- ``-m slow`` runs the README's and docs/index.md's: a stand-in for ``make demo`` (the same default search,
  cut to 3 trials), then every block in order, in a scratch folder holding the project's ``.venv`` and
  ``examples/``, each line and each Python block on its own; the lines that need more are left out (their
  options were checked above).
"""

from __future__ import annotations

import ast
import importlib
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from nas.cli.commands import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NEEDS = re.compile(r"\[needs: (gpu|cluster|postgres|browser|minutes|install)\]")


@dataclass(frozen=True)
class Snippet:
    lang: str  # "bash": one command line (continuations joined); "python": a whole block
    text: str
    line: int  # where it starts in its file
    needs: str | None = None  # what it needs beyond this machine and a few minutes
    setup: bool = False  # the README's first block: `make demo` / `make test`
    source: str = "README.md"

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.text.splitlines()[0][:90]}"


def _snippets(path: Path = README) -> list[Snippet]:
    out: list[Snippet] = []
    lines = path.read_text().splitlines()
    source = str(path.relative_to(ROOT))
    i, first = 0, path == README
    while i < len(lines):
        fence = re.fullmatch(r"```(bash|python)\s*", lines[i])
        if not fence:
            i += 1
            continue
        lang, start = fence.group(1), i + 2
        end = lines.index("```", i + 1)
        body = lines[i + 1 : end]
        if lang == "python":
            out.append(Snippet("python", "\n".join(body), start, source=source))
        else:
            pending, at = "", start
            for n, line in enumerate(body):
                if not pending:
                    at = start + n
                pending += line.rstrip()
                if pending.endswith("\\"):
                    pending = pending[:-1] + " "
                    continue
                if pending.strip():
                    found = NEEDS.search(pending)
                    needs = found.group(1) if found else None
                    out.append(Snippet("bash", pending, at, needs, setup=first, source=source))
                pending = ""
        first = False
        i = end + 1
    return out


PAGES = sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)
SNIPPETS = [*_snippets(), *(s for page in PAGES for s in _snippets(page))]
RUN = [s for s in SNIPPETS if s.source in ("README.md", "docs/index.md")]  # what -m slow runs


def _nas_args(text: str) -> list[str] | None:
    """The arguments of the ``nas`` command a bash line runs (after ``ray job submit ... --``), or None."""
    words = shlex.split(text, comments=True)
    for n, word in enumerate(words):
        if word == "nas" or word.endswith("bin/nas"):  # not a URL's database named nas
            return words[n + 1 :]
    return None


NAS_LINES = [s for s in SNIPPETS if s.lang == "bash" and _nas_args(s.text) is not None]


def test_the_readme_and_the_docs_have_the_snippets_this_test_reads():
    langs = {s.lang for s in SNIPPETS}
    assert langs == {"bash", "python"}
    assert [s.text.split("#")[0].strip() for s in SNIPPETS if s.setup] == ["make demo", "make test"]
    assert len(NAS_LINES) >= 20


@pytest.mark.parametrize("snippet", NAS_LINES, ids=str)
def test_each_nas_line_names_a_command_and_options_that_exist(snippet: Snippet):
    group = typer.main.get_command(app)
    args = _nas_args(snippet.text)
    assert args, f"{snippet}: no command"
    command = group.commands.get(args[0])  # type: ignore[attr-defined]
    assert command is not None, f"{snippet}: no command {args[0]!r}"
    known = {opt for param in command.params for opt in param.opts + param.secondary_opts}
    for word in args[1:]:
        if word.startswith("-"):
            assert word.split("=", 1)[0] in known, f"{snippet}: `nas {args[0]}` has no option {word}"
        if word.startswith("examples/"):
            assert (ROOT / word).is_file(), f"{snippet}: {word} is not in the repository"


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.lang == "python"], ids=str)
def test_each_python_block_compiles_and_imports_what_exists(snippet: Snippet):
    tree = ast.parse(snippet.text, filename=str(snippet))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name) or importlib.util.find_spec(
                    f"{module.__name__}.{alias.name}"
                ), f"{snippet}: {node.module} has no {alias.name}"
    for word in re.findall(r"[\"'](examples/[^\"']+)[\"']", snippet.text):
        assert (ROOT / word).is_file(), f"{snippet}: {word} is not in the repository"


@pytest.fixture(scope="module")
def after_demo(tmp_path_factory) -> Path:
    """A scratch folder as a user's checkout is after ``make demo``: the project's .venv and examples, and
    the demo's study (the same default search, cut to 3 trials so it takes about a minute)."""
    where = tmp_path_factory.mktemp("readme")
    venv = Path(sys.prefix)
    (where / ".venv").symlink_to(venv)
    (where / "examples").symlink_to(ROOT / "examples")
    _run(where, "bash", ".venv/bin/nas search --budget 3trials")
    assert (where / "runs" / "coatnet-proxy" / "report.html").is_file()
    return where


def _run(where: Path, lang: str, text: str) -> None:
    command = ["bash", "-c", text] if lang == "bash" else [str(where / ".venv/bin/python"), "-c", text]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=where, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (
        f"{text}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


@pytest.mark.slow
def test_the_snippets_run_as_written_after_the_demo(after_demo: Path):
    ran = []
    for snippet in RUN:
        if snippet.setup or snippet.needs:
            continue
        _run(after_demo, snippet.lang, snippet.text)
        ran.append(str(snippet))
    assert len(ran) >= 8, ran
