"""A search space narrowed to some values of its decisions: ``nas search --narrow s3.op=rel,ext``.

A researcher often searches part of a space: the attention type of CoAtNet's last two stages at CoAtNet-0's
depths, or the extent k of SASA's local attention with the conv stem fixed. :class:`NarrowedSpace` wraps a
space and, while its ``sample`` runs, offers each narrowed decision only the values kept (a categorical one
the kept choices, in the space's order; an integer one the kept run ``LO..HI``), so it samples, replays and
decides membership by the space's one definition. Its baselines are those of the space it contains; its
cardinality is the space's own count over the narrowed decisions; its supernet cover is the space's, each
network moved into the narrowing, so a one-shot search trains no weight the narrowed space never uses.

A narrowing is data: each name must be one of the space's decisions (:meth:`SearchSpace.decisions`), each
value one of that decision's, an integer decision keeps a run of whole numbers, and nothing is left empty;
otherwise a ``ValueError`` of one sentence names what is wrong. :func:`narrowing` gives its canonical form
(decisions in the space's order, values in the decision's, a decision kept whole dropped), which a study
records and a resume must match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nas.core.arch import Arch
from nas.core.bounds import shown
from search_spaces.base import Baseline, SearchSpace

__all__ = ["NarrowedSpace", "describe", "narrow_space", "narrowing", "parse_items"]

_MAX_ITEMS = 1000  # decisions or values in one narrowing: far above any space's, well below harm


def parse_items(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUES`` items (the command line's ``--narrow``, repeatable) as ``{name: values}``."""
    out: dict[str, str] = {}
    for item in items:
        name, sep, values = str(item).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(
                f"narrow: {shown(item)} is not NAME=VALUES; write e.g. s3.op=rel,ext or s2.depth=2..4"
            )
        if name in out:
            raise ValueError(f"narrow: {name} is given twice; give its values once, comma-separated")
        out[name] = values
    return out


def narrowing(space: SearchSpace, raw: Mapping[str, Any]) -> dict[str, list[Any]]:
    """The canonical narrowing of ``space`` that ``raw`` asks for (``{decision: values}``, the values a list,
    one value, or text such as ``rel,ext`` or ``2..4``); a ValueError of one sentence if it is not one."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"narrow: must map decisions to their values, got {shown(raw)}")
    if len(raw) > _MAX_ITEMS:
        raise ValueError(f"narrow: at most {_MAX_ITEMS} decisions, got {len(raw):,}")
    decisions = space.decisions()
    kept: dict[str, list[Any]] = {}
    for name, values in raw.items():
        if name not in decisions:
            raise ValueError(
                f"narrow: {shown(name)} is not a decision of the {space.name} space; decisions: "
                f"{', '.join(decisions)}"
            )
        kept[name] = _values(space.name, name, decisions[name], values)
    return {name: kept[name] for name in decisions if name in kept and len(kept[name]) < len(decisions[name])}


def narrow_space(space: SearchSpace, narrowed: Mapping[str, Any]) -> SearchSpace:
    """``space`` with each decision of ``narrowed`` (``{name: values}``) kept to those values; the space
    itself where nothing is narrowed. A ValueError of one sentence if it is not a narrowing."""
    kept = NarrowedSpace(space, narrowed)
    return kept if kept.narrowing else space


def describe(narrowed: Mapping[str, Sequence[Any]]) -> str:
    """A narrowing as the command line writes it: ``s3.op=rel,ext s2.depth=2..4``."""
    return " ".join(f"{name}={_text(values)}" for name, values in narrowed.items())


class NarrowedSpace(SearchSpace):
    """``space`` with each decision of ``narrowed`` (a canonical :func:`narrowing`) kept to those values."""

    def __init__(self, space: SearchSpace, narrowed: Mapping[str, Any]) -> None:
        self.space = space
        self._narrowing = narrowing(space, narrowed)
        self.name = space.name
        self.profiles = space.profiles
        self.description = f"{space.description}, narrowed to {describe(self.narrowing) or 'all of it'}"

    @property
    def narrowing(self) -> dict[str, list[Any]]:
        return self._narrowing

    def decisions(self) -> dict[str, tuple[Any, ...] | range]:
        out = self.space.decisions()
        for name, values in self.narrowing.items():
            out[name] = range(values[0], values[-1] + 1) if isinstance(out[name], range) else tuple(values)
        return out

    def count(self, domains: Mapping[str, Sequence[Any]]) -> int:
        return self.space.count(domains)

    def sample(self, trial: Any) -> Arch:
        return self.space.sample(_NarrowingTrial(trial, self.narrowing))

    def encode(self, arch: Arch) -> dict[str, Any]:
        return self.space.encode(arch)

    def choices(self) -> dict[str, str]:
        return {**self.space.choices(), "narrowed to": describe(self.narrowing) or "all of it"}

    def baselines(self) -> dict[str, Baseline]:
        """The space's baselines that the narrowing keeps."""
        return {name: b for name, b in self.space.baselines().items() if self.contains(b.arch)}

    def supernet_cover(self) -> list[Arch]:
        """The space's cover, each network moved into the narrowing: a value not kept becomes the nearest
        kept one (the first kept choice of a name), a decision the network never asked takes its largest
        kept value. Every kept op of a stage still comes at its largest depth, k and width and with every
        kept width, so the supernet holds every path of the narrowed space and no weight outside it."""
        cover: dict[str, Arch] = {}
        for arch in self.space.supernet_cover():
            moved = self.sample(_NearestTrial(self.space.encode(arch)))
            cover.setdefault(moved.key, moved)
        return list(cover.values())


class _NarrowingTrial:
    """A trial (Optuna's, ``FixedTrial``, ``RandomTrial``, ...) whose ``suggest_*`` offer a narrowed
    decision only its kept values; everything else is the trial's own."""

    def __init__(self, trial: Any, narrowed: Mapping[str, Sequence[Any]]) -> None:
        self._trial, self._narrowed = trial, narrowed

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        if name in self._narrowed:
            choices = tuple(c for c in choices if c in self._narrowed[name])
            if not choices:  # the space offered fewer values here than it declares: a space's defect
                raise ValueError(f"{name}: the space offers none of {_text(self._narrowed[name])} here")
        return self._trial.suggest_categorical(name, choices)

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        if name in self._narrowed:
            low, high = max(low, self._narrowed[name][0]), min(high, self._narrowed[name][-1])
            if low > high:
                raise ValueError(f"{name}: the space offers none of {_text(self._narrowed[name])} here")
        return self._trial.suggest_int(name, low, high, step=step, log=log)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trial, name)


class _NearestTrial:
    """Answers each decision with ``params``' value if offered, else the offered value nearest to it (the
    larger of two), the first offered choice of a name, or the largest offered value where ``params`` has
    none."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = params

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        want = self.params.get(name)
        if want in choices:
            return want
        if not all(isinstance(c, int) for c in choices):
            return choices[0]
        if not isinstance(want, int):
            return max(choices)
        return min(choices, key=lambda c: (abs(c - want), -c))

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        want = self.params.get(name)
        return high if not isinstance(want, int) else min(max(want, low), high)


def _values(space: str, name: str, domain: tuple[Any, ...] | range, values: Any) -> list[Any]:
    """The values of decision ``name`` that ``values`` keeps, in the domain's order; a ValueError of one
    sentence unless they are some of its values (a run of them for an integer decision)."""
    if isinstance(values, str):
        text = values.strip()
        lo, dots, hi = text.partition("..")
        if dots and isinstance(domain, range):
            low, high = _whole(space, name, lo), _whole(space, name, hi)
            if low > high:
                raise ValueError(f"narrow: {name}: {text} is an empty run; write LO..HI with LO <= HI")
            outside = [v for v in (low, high) if v not in domain]  # checked first: the run may be vast
            values = outside[:1] or list(range(low, high + 1))
        else:
            values = [v.strip() for v in text.split(",")] if text else []
    elif not isinstance(values, (list, tuple)):
        values = [values]
    if len(values) > _MAX_ITEMS:
        raise ValueError(f"narrow: {name}: at most {_MAX_ITEMS} values, got {len(values):,}")
    if not values:
        raise ValueError(f"narrow: {name} keeps no value; give at least one of {_allowed(domain)}")
    kept = set()
    for value in values:
        if isinstance(value, str) and all(isinstance(v, int) for v in domain):
            value = _whole(space, name, value)
        if isinstance(value, bool) or value not in domain:
            raise ValueError(
                f"narrow: {name}: {shown(value)} is not one of its values in the {space} space; "
                f"allowed: {_allowed(domain)}"
            )
        kept.add(value)
    ordered = [v for v in domain if v in kept]
    if isinstance(domain, range) and ordered != list(range(ordered[0], ordered[-1] + 1)):
        raise ValueError(
            f"narrow: {name}: {', '.join(map(str, ordered))} is not a run of whole numbers; keep one, "
            f"e.g. {ordered[0]}..{ordered[-1]}"
        )
    return ordered


def _whole(space: str, name: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"narrow: {name}: {shown(text)} is not a whole number ({space} space)") from None


def _allowed(domain: tuple[Any, ...] | range) -> str:
    """A decision's values for a message: ``rel, ext`` or ``1..28``."""
    return f"{domain[0]}..{domain[-1]}" if isinstance(domain, range) else ", ".join(map(str, domain))


def _text(values: Sequence[Any]) -> str:
    """Kept values as the command line writes them: ``rel,ext``, or ``2..4`` for a run of integers."""
    values = list(values)
    if (
        len(values) > 2
        and all(isinstance(v, int) for v in values)
        and values == list(range(values[0], values[-1] + 1))
    ):
        return f"{values[0]}..{values[-1]}"
    return ",".join(map(str, values))
