"""How a message names an option: as the flag a command-line user types (``--resume``), or as the keyword a
Python caller passes (``resume=True``). ``nas``'s commands switch to flags (:func:`flags`); a message
names an option with :func:`option`, so the Python API's errors do not tell its callers to pass a flag."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_flags: ContextVar[bool] = ContextVar("option_names_flags", default=False)


@contextmanager
def flags() -> Iterator[None]:
    """Name options as command-line flags while a ``nas`` command runs."""
    token = _flags.set(True)
    try:
        yield
    finally:
        _flags.reset(token)


def option(name: str, value: object = True) -> str:
    """``name`` (a setting's keyword, e.g. ``"resume"``) as the user sets it: ``--resume`` on the command
    line, ``resume=True`` from Python; ``value`` is an example of what it takes (``option("study", "NAME")``
    is ``--study`` or ``study='NAME'``)."""
    if _flags.get():
        return "--" + name.replace("_", "-")
    return f"{name}={value!r}"


def setting(name: str, value: object) -> str:
    """``name`` set to ``value``, as the user writes it: ``--fidelity single`` on the command line,
    ``fidelity='single'`` from Python."""
    return f"{option(name)} {value}" if _flags.get() else option(name, value)


def together(*named: str) -> str:
    """Options named by :func:`option` / :func:`setting`, given together: ``--backend ray --resume`` on the
    command line, ``backend='ray', resume=True`` from Python."""
    return (" " if _flags.get() else ", ").join(named)
