"""The one reader of the files a user hands over (an architecture's JSON, a search's YAML or TOML config),
within bounds whatever the file holds.

- Only a regular file is opened: its ``stat`` is checked first (a FIFO would block forever, ``/dev/zero``
  would fill memory, a directory is no file), and again on the open descriptor, opened without blocking in
  case the path was swapped in between.
- At most :data:`MAX_BYTES` (1 MiB) are read; the text must be UTF-8 (a leading byte-order mark is dropped).
- The parsed value may nest at most :data:`MAX_NESTING` levels of lists and mappings, checked before the
  parser recurses (a bracket scan for JSON and TOML, the composer's depth for YAML), so deep nesting is one
  sentence, not a ``RecursionError``.
- It may hold at most :data:`MAX_VALUES` values, YAML aliases counted each time they are used, checked on
  YAML's node graph before any object is built: a few hundred bytes of aliases ("billion laughs") cannot
  expand into billions of values, nor make an error message that shows the value hang.

The files the tool writes and reads back (a run's ``manifest.json``, the latency tables and part-cost stores
under ``--runs-dir``) are read by the same functions with :data:`STORE_BOUNDS`: they grow with a study (a
session, a measured part each) far past an input's size, but a hand-edited or damaged one is as hostile as any
input, so the same checks hold with larger limits.

Every refusal is a ``ValueError`` of one sentence naming the file.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from nas.core.bounds import shown

__all__ = [
    "FORMATS",
    "MAX_BYTES",
    "MAX_NESTING",
    "MAX_VALUES",
    "STORE_BOUNDS",
    "Bounds",
    "check_regular",
    "load",
    "load_store",
    "parse",
    "read_text",
    "where",
]

MAX_BYTES = 1 << 20  # an architecture is ~1 KiB, a search config a few; a megabyte is far beyond any real one
MAX_NESTING = 32  # an architecture is flat, a config two levels deep (evaluator-config, its opt_kwargs)
MAX_VALUES = 10_000  # values after YAML aliases are expanded: an architecture holds ~100, a config ~50
FORMATS = {".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}


class Bounds(NamedTuple):
    """The most bytes a file and the most values its parsed value may hold (nesting is always
    :data:`MAX_NESTING`), and what the messages call the thing bounded."""

    max_bytes: int = MAX_BYTES
    max_values: int = MAX_VALUES
    of: str = "an input"


INPUT_BOUNDS = Bounds()
# a manifest gains ~15 values a session, a part-cost store 4 and a latency table ~3 per part measured: 16 MiB
# and a million values are thousands of sessions and hundreds of thousands of parts, and parse in a second
STORE_BOUNDS = Bounds(16 << 20, 1_000_000, "a file of a run")

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
# What a bracket scan skips: strings (and TOML's comments), whose brackets nest nothing. Each pattern matches
# wherever its opening quote is, a string left open running to the end of the text (the parser refuses it):
# a pattern that could fail after scanning ahead would be tried again from every later quote, and a line of
# escaped quotes would take time quadratic in its length (hours for a megabyte).
_JSON_SKIP = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*["\\]?', re.S)
_TOML_SKIP = re.compile(
    r'"""(?:[^\\]|\\.)*?(?:"""|\\?\Z)|\'\'\'.*?(?:\'\'\'|\Z)|"[^"\\\n]*(?:\\.[^"\\\n]*)*["\\]?'
    r"|'[^'\n]*'?|#[^\n]*",
    re.S,
)


def where(what: str, path: str | Path) -> str:
    """``what`` and the file's name, quoted on one line (a long one cut in the middle): an error's subject."""
    name = repr(str(path))
    return f"{what} {name if len(name) <= 200 else name[:100] + '...' + name[-99:]}"


def check_regular(
    path: str | Path, what: str, max_bytes: int | None = MAX_BYTES, of: str = INPUT_BOUNDS.of
) -> None:
    """ValueError in one sentence starting with ``what`` and the file's name unless ``path`` is a regular
    file (by its ``stat``, before anything opens it) of at most ``max_bytes`` (None: any size)."""
    label = where(what, path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{label}: cannot be read (no such file)") from None
    except OSError as err:
        raise ValueError(f"{label}: cannot be read ({err.strerror})") from None
    except ValueError as err:  # a name holding a NUL byte
        raise ValueError(f"{label}: cannot be read ({err})") from None
    _check_stat(info, label, max_bytes, of)


def read_text(path: str | Path, what: str, bounds: Bounds = INPUT_BOUNDS) -> str:
    """The text of the regular file ``path`` (at most ``bounds.max_bytes``, UTF-8); ValueError in one
    sentence starting with ``what`` and the file's name otherwise."""
    label = where(what, path)
    max_bytes = bounds.max_bytes
    check_regular(path, what, max_bytes, bounds.of)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        raise ValueError(f"{label}: cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as file:
        _check_stat(os.fstat(file.fileno()), label, max_bytes, bounds.of)  # the path may have been swapped
        try:
            data = file.read(max_bytes + 1)
        except OSError as err:
            raise ValueError(f"{label}: cannot be read ({err.strerror})") from None
    if len(data) > max_bytes:
        raise ValueError(f"{label}: is over the limit of {bounds.of}, {_size(max_bytes)}")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise ValueError(
            f"{label}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None


def _size(max_bytes: int) -> str:
    """``max_bytes`` as the messages give a limit: ``1,048,576 bytes (1 MiB)``."""
    mib = f" ({max_bytes >> 20} MiB)" if max_bytes % (1 << 20) == 0 else ""
    return f"{max_bytes:,} bytes{mib}"


def _check_stat(info: os.stat_result, label: str, max_bytes: int | None, of: str = INPUT_BOUNDS.of) -> None:
    for test, kind in _KINDS:
        if test(info.st_mode):
            raise ValueError(f"{label}: cannot be read (it is {kind}, not a regular file)")
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{label}: cannot be read (it is not a regular file)")
    if max_bytes is not None and info.st_size > max_bytes:
        raise ValueError(f"{label}: is {info.st_size:,} bytes, over the limit of {of}, {_size(max_bytes)}")


def load(path: str | Path, what: str, fmt: str | None = None, bounds: Bounds = INPUT_BOUNDS) -> Any:
    """The value in the file ``path``, read by :func:`read_text` and parsed by :func:`parse` as ``fmt``
    (``"JSON"``, ``"YAML"`` or ``"TOML"``; None: by the file's suffix, see :data:`FORMATS`), within
    ``bounds`` (:data:`STORE_BOUNDS` for a file the tool wrote)."""
    label = where(what, path)
    if fmt is None:
        fmt = FORMATS.get(Path(path).suffix.lower())
        if fmt is None:
            raise ValueError(f"{label}: must end in {', '.join(FORMATS)}")
    return parse(read_text(path, what, bounds), fmt, label, bounds)


def load_store(path: str | Path) -> Any:
    """The JSON value of a file the tool wrote and reads back (a run's ``manifest.json``, a latency table, a
    part-cost store), read as :func:`load` reads an input but within :data:`STORE_BOUNDS`. FileNotFoundError
    where there is none; otherwise a ValueError whose message says what is wrong with the file as the end of
    a sentence that names it (``is not valid JSON (...)``, ``cannot be read (...)``, ``nests ...``), for the
    caller to say what the file is and what to do."""
    if not os.path.lexists(path):  # a dangling link is there, and refused as unreadable
        raise FileNotFoundError(path)
    label = where("file", path)
    try:
        return load(path, "file", "JSON", STORE_BOUNDS)
    except ValueError as err:
        problem = str(err).removeprefix(f"{label}: ")
        raise ValueError(f"is {problem}" if problem.startswith("not ") else problem) from None


def parse(text: str, fmt: str, label: str, bounds: Bounds = INPUT_BOUNDS) -> Any:
    """``text`` parsed as ``fmt`` (``"JSON"``, ``"YAML"`` or ``"TOML"``) within ``bounds`` and
    :data:`MAX_NESTING`; ValueError in one sentence starting with ``label`` otherwise (YAML's empty document
    is None)."""
    if fmt not in ("JSON", "YAML", "TOML"):
        raise ValueError(f"{label}: unknown format {shown(fmt)}; allowed: JSON, YAML, TOML")
    if not isinstance(text, str):
        raise ValueError(f"{label}: must be text, got {type(text).__name__}")
    if len(text) > bounds.max_bytes:
        size = _size(bounds.max_bytes).replace("bytes", "characters")
        raise ValueError(f"{label}: is longer than {size}, the limit of {bounds.of}")
    if fmt != "YAML":
        root = 1 if fmt == "TOML" else 0  # TOML's top level is a table
        if _bracket_depth(text, _JSON_SKIP if fmt == "JSON" else _TOML_SKIP) + root > MAX_NESTING:
            raise _too_deep(label, bounds.of)
    try:
        if fmt == "JSON":
            value = json.loads(text)
        elif fmt == "TOML":
            value = tomllib.loads(text)
        else:
            value = _yaml_load(text, label, bounds)
    except ValueError as err:
        raise _parse_error(err, label, fmt) from None
    _check_size(value, label, fmt, bounds)
    return value


def _parse_error(err: ValueError, label: str, fmt: str) -> ValueError:
    """One sentence for a parser's ValueError: a decode error, or a number of more digits than Python
    converts (in any format); this module's own refusals as they are."""
    if str(err).startswith(label):
        return err
    msg, line, col = getattr(err, "msg", None), getattr(err, "lineno", None), getattr(err, "colno", None)
    if isinstance(err, json.JSONDecodeError):
        detail = f"{msg.removesuffix(' at')} at line {line} column {col}"  # "starting at at line"
    elif "integer string conversion" in str(err):
        detail = f"a number of more than {sys.get_int_max_str_digits()} digits"
    else:  # tomllib.TOMLDecodeError, our YAML loader's parse errors
        detail = _one_line(str(err))
    return ValueError(f"{label}: not valid {fmt} ({detail})")


def _bracket_depth(text: str, skip: re.Pattern[str]) -> int:
    """How deep brackets nest in ``text`` outside its strings (in time linear in its length)."""
    brackets = _NOT_BRACKETS.sub("", skip.sub("", text))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _check_size(value: Any, label: str, fmt: str, bounds: Bounds = INPUT_BOUNDS) -> None:
    """Refuse a parsed value nested deeper than MAX_NESTING or of more than ``bounds.max_values`` values (no
    recursion: a TOML table header may nest deeper than the bracket scan sees)."""
    count, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > bounds.max_values:
            raise _too_many(label, fmt, bounds)
        if isinstance(item, dict):
            children = [part for pair in item.items() for part in pair]
        elif isinstance(item, (list, tuple)):
            children = list(item)
        else:
            continue
        if depth >= MAX_NESTING:  # the root is level 1
            raise _too_deep(label, bounds.of)
        stack.extend((child, depth + 1) for child in children)


def _too_deep(label: str, of: str = INPUT_BOUNDS.of) -> ValueError:
    return ValueError(
        f"{label}: nests lists and mappings deeper than {MAX_NESTING} levels, the limit of {of}"
    )


def _too_many(label: str, fmt: str, bounds: Bounds = INPUT_BOUNDS) -> ValueError:
    aliases = ", YAML aliases counted each time they are used" if fmt == "YAML" else ""
    return ValueError(
        f"{label}: holds more than {bounds.max_values:,} values{aliases}, the limit of {bounds.of}"
    )


def _yaml_load(text: str, label: str, bounds: Bounds = INPUT_BOUNDS) -> Any:
    import yaml  # here, so that ``import nas`` stays cheap

    try:
        return _bounded_loader()(text, label, bounds).get_single_data()
    except yaml.YAMLError as err:
        raise ValueError(_yaml_error(err)) from None


@functools.cache
def _bounded_loader() -> type:
    import yaml

    class _BoundedLoader(yaml.SafeLoader):
        """PyYAML's safe loader (the pure-Python composer: its depth can be watched, libyaml's recurses in C)
        that counts collections as it composes them and, before building any object, the values the document
        expands to with its aliases."""

        def __init__(self, text: str, label: str, bounds: Bounds) -> None:
            super().__init__(text)
            self.label, self.bounds, self.depth, self.nodes = label, bounds, 0, 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.nodes += 1
            if self.nodes > self.bounds.max_values:
                raise _too_many(self.label, "YAML", self.bounds)
            return super().compose_node(parent, index)

        def compose_sequence_node(self, anchor: Any) -> Any:
            return self._nested(super().compose_sequence_node, anchor)

        def compose_mapping_node(self, anchor: Any) -> Any:
            return self._nested(super().compose_mapping_node, anchor)

        def _nested(self, compose: Any, anchor: Any) -> Any:
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise _too_deep(self.label, self.bounds.of)
            try:
                return compose(anchor)
            finally:
                self.depth -= 1

        def compose_document(self) -> Any:
            node = super().compose_document()
            _check_expansion(node, self.label, self.bounds)
            return node

    return _BoundedLoader


def _check_expansion(root: Any, label: str, bounds: Bounds = INPUT_BOUNDS) -> None:
    """Refuse a YAML node graph that expands (each alias a copy of its anchor) to more than the bounds' values
    or deeper than MAX_NESTING, or that holds itself; each node is visited once."""
    done: dict[int, tuple[int, int]] = {}  # id -> (values, depth) once expanded
    path: set[int] = set()  # nodes being expanded: a child among them is a cycle
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finish = stack.pop()
        if id(node) in done:
            continue
        children = _node_children(node)
        if not finish:
            if id(node) in path:
                raise ValueError(f"{label}: a YAML alias refers to a collection that holds it")
            path.add(id(node))
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in done)
            continue
        path.discard(id(node))
        values = 1 + sum(done[id(c)][0] for c in children)
        collection = isinstance(node.value, list)  # a sequence or mapping node; a scalar's value is a str
        depth = 1 + max((done[id(c)][1] for c in children), default=0) if collection else 0
        if values > bounds.max_values:
            raise _too_many(label, "YAML", bounds)
        if depth > MAX_NESTING:
            raise _too_deep(label, bounds.of)
        done[id(node)] = (values, depth)


def _node_children(node: Any) -> list[Any]:
    if not isinstance(node.value, list):  # a scalar
        return []
    return [part for item in node.value for part in (item if isinstance(item, tuple) else (item,))]


def _yaml_error(err: Exception) -> str:
    mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return _one_line(str(err)) or type(err).__name__


def _one_line(text: str) -> str:
    line = " ".join(part.strip() for part in text.strip().splitlines())
    return line if len(line) <= 200 else line[:197] + "..."
