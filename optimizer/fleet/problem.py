"""The fleet problem: per series its hourly demand in GPUs of its own model, the GPU models it may use and the
conversion between models, and the price of each model per purchase option.

Demand is converted between models by relative speed of the series' kind of work (the GPU catalogue,
:mod:`optimizer.book.gpus`): one GPU-hour of model A's work takes ``speed_A / speed_B`` GPU-hours of model B
(``ratio``). The placement is fluid (fractional GPUs of a model may serve a series in an hour), the
effective-throughput model of Gavel (Narayanan et al., OSDI '20); the GPUs bought are whole.

Three variants of one fleet (:meth:`FleetProblem.variant`) are compared on the same window:

* ``alone``: each series on its own model, planned by itself (one problem per series, :meth:`alone`);
* ``pooled``: the series share capacity but each stays on its own model (no substitution);
* ``substitution``: the series share capacity and may use any model they are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from optimizer.book.gpus import GpuModelSpec, UnknownGpuModel, spec_for
from optimizer.book.prices import GpuPrice, price_for

VARIANTS = ("alone", "pooled", "substitution")


@dataclass(frozen=True)
class FleetProblem:
    """One fleet on one window of ``T`` hours.

    * ``series``: ids (N); ``kinds``: ``training``/``inference`` per series; ``own``: each series' own model
      (the one its demand is measured on);
    * ``allowed``: per series the models it may use (catalogue names, :func:`optimizer.book.gpus.models_for`);
    * ``floors``: per series its memory floor (GB) or None, kept to check placements against;
    * ``models``: every model in play (M), own and allowed; ``memory_gb``: per model;
    * ``demand``: (N, T) GPUs of the series' own model needed per hour (whole GPUs, >= 0; NaN = unknown, no
      need); ``ratio``: (N, M) GPUs of model m per GPU of the series' own model, NaN where not allowed;
    * ``prices``: USD per GPU-hour per model and option (:class:`optimizer.book.prices.GpuPrice`);
    * ``spot_redo``: expected GPU-hours redone on demand per spot GPU-hour (0 = interruptions cost
      capacity, not money), as in :mod:`optimizer.rivals.perfect_foresight`."""

    series: list[str]
    kinds: list[str]
    own: list[str]
    allowed: list[list[str]]
    floors: list[float | None]
    models: list[str]
    memory_gb: dict[str, float]
    demand: np.ndarray
    ratio: np.ndarray
    prices: dict[str, GpuPrice]
    spot_redo: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def hours(self) -> int:
        """T, the window's hours."""
        return int(self.demand.shape[1])

    def need(self) -> np.ndarray:
        """(N, T) demand with unknown hours as 0 and each hour rounded up to whole GPUs."""
        d = np.nan_to_num(np.asarray(self.demand, float), nan=0.0)
        return np.ceil(np.maximum(d, 0.0) - 1e-9)

    def variant(self, name: str) -> "FleetProblem":
        """``pooled``: each series allowed only its own model; ``substitution``: as given. (``alone`` is
        :meth:`alone`.) Raises ValueError for another name."""
        if name == "substitution":
            return self
        if name != "pooled":
            raise ValueError(f"fleet variant {name!r}: expected pooled or substitution (alone: FleetProblem.alone)")
        ratio = np.full_like(self.ratio, np.nan)
        for i, m in enumerate(self.own):
            ratio[i, self.models.index(m)] = 1.0
        return replace(self, allowed=[[m] for m in self.own], ratio=ratio)

    def alone(self) -> list["FleetProblem"]:
        """One problem per series, on its own model only."""
        pooled = self.variant("pooled")
        return [replace(pooled, series=[s], kinds=[self.kinds[i]], own=[self.own[i]], allowed=[[self.own[i]]],
                        floors=[self.floors[i]], demand=self.demand[i:i + 1], ratio=pooled.ratio[i:i + 1])
                for i, s in enumerate(self.series)]

    def window(self, start: int, stop: int, demand: np.ndarray | None = None) -> "FleetProblem":
        """The same fleet on hours ``[start, stop)`` (or on ``demand``, an (N, T') scenario, when given)."""
        return replace(self, demand=self.demand[:, start:stop] if demand is None else demand)


def build_problem(series: list[str], kinds: list[str], own: list[str], allowed: list[list[str]],
                  floors: list[float | None], demand: np.ndarray, catalogue: dict[str, GpuModelSpec],
                  book: dict[str, GpuPrice], spot_redo: float = 0.0) -> FleetProblem:
    """A :class:`FleetProblem` from per-series lists (length N) and ``demand`` (N, T) in GPUs of each series'
    own model per hour. ``allowed`` is cut to the models at or above each series' memory floor (``floors``),
    so a list that names a smaller model never places work on it. Names are resolved through the catalogue
    (:func:`optimizer.book.gpus.spec_for`);
    prices through the price book (:func:`optimizer.book.prices.price_for`; a model the book lacks gets its
    ``default`` entry, said in ``notes``). Raises :class:`optimizer.book.gpus.UnknownGpuModel` for a model not
    in the catalogue, ValueError when the shapes disagree or a series may use no model (after its floor)."""
    demand = np.asarray(demand, float)
    n = len(series)
    if demand.ndim != 2 or demand.shape[0] != n or not (len(kinds) == len(own) == len(allowed) == len(floors) == n):
        raise ValueError(f"fleet: {n} series but demand {demand.shape} and lists of {len(kinds)}, {len(own)}, "
                         f"{len(allowed)}, {len(floors)}")
    own = [spec_for(catalogue, m).name for m in own]
    allowed = [[x for x in (spec_for(catalogue, m).name for m in a) if f is None or catalogue[x].memory_gb >= f]
               for a, f in zip(allowed, floors)]
    for s, a in zip(series, allowed):
        if not a:
            raise ValueError(f"fleet: series {s!r} may use no GPU model")
    models = list(dict.fromkeys([*own, *(m for a in allowed for m in a)]))
    ratio = np.full((n, len(models)), np.nan)
    for i in range(n):
        kind = kinds[i]
        if kind not in ("training", "inference"):
            raise ValueError(f"fleet: series {series[i]!r}: kind {kind!r}")
        base = catalogue[own[i]].speed[kind]
        for m in allowed[i]:
            ratio[i, models.index(m)] = base / catalogue[m].speed[kind]
    prices, notes = {}, []
    for m in models:
        prices[m], note = price_for(book, m)
        if note:
            notes.append(note)
    return FleetProblem(series=list(series), kinds=list(kinds), own=own, allowed=allowed, floors=list(floors),
                        models=models, memory_gb={m: catalogue[m].memory_gb for m in models}, demand=demand,
                        ratio=ratio, prices=prices, spot_redo=spot_redo, notes=notes)


def violations(problem: FleetProblem, placed: np.ndarray, eps: float = 1e-6) -> int:
    """Steps where a series is served by a model outside its list or below its memory floor: the count of
    (series, model, hour) with ``placed`` (N, M, T) GPU-hours > ``eps`` on such a model. Checked against
    ``allowed`` and ``floors`` and the models' memory, not against ``ratio``, so a solver that ignored the
    mask would be caught."""
    bad = np.zeros(placed.shape[:2], bool)
    for i in range(len(problem.series)):
        for j, m in enumerate(problem.models):
            floor = problem.floors[i]
            bad[i, j] = m not in problem.allowed[i] or (floor is not None and problem.memory_gb[m] < floor)
    return int(((placed > eps) & bad[:, :, None]).sum())


__all__ = ["FleetProblem", "UnknownGpuModel", "VARIANTS", "build_problem", "violations"]


def placement_cells(ratio: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The placement variables of the limit and the replay: ``(series, model, hour)`` index arrays, one entry per
    hour a series needs GPUs (``need`` (N, T) > 0) and per model it may use (``ratio`` (N, M) finite), in series,
    model, hour order; three empty int arrays when there is none."""
    cells = [(np.full(len(h), i), np.full(len(h), j), h)
             for i in range(need.shape[0]) for h in [np.flatnonzero(need[i] > 0)]
             for j in range(ratio.shape[1]) if np.isfinite(ratio[i, j])]
    if not cells:
        return np.zeros(0, int), np.zeros(0, int), np.zeros(0, int)
    return tuple(np.concatenate(v).astype(int) for v in zip(*cells))
