"""The committed layer: reserved GPUs for a training pool whose price book limits spot or makes it dearer.

A training policy reserves GPUs per week (:class:`optimizer.plan.policy.TrainingParams`). With the default
book (:mod:`optimizer.book.prices`: spot 0.40 x on-demand, about 0.405 x with its interruptions; reserved
0.60 x; no spot cap) spot beats a reservation, and the scan (:data:`optimizer.search.space.TRAINING_GRID`)
reserves nothing. Two books change that, and for them :func:`committed_layer` adds reservation
levels to the scan:

* **a book that caps spot** (``spot_cap_gpus`` / ``spot_cap_share``, :mod:`optimizer.book.purchase`):
  the spot the cap refuses is bought on demand, at 1.0 x. A reserved GPU, at 0.60 x, is cheaper
  for the GPUs the cap refuses most of the week. The policy's reservation then has
  ``reservation_basis="spot_cap"``: ``reservation_ratio`` x the GPUs the cap refuses at the weekly
  forecast's level ``L`` (whole GPUs), :func:`optimizer.book.purchase.refused_gpus`:
  ``max(L - spot_cap_gpus, L - floor(spot_cap_share x L), 0)``. The newsvendor argument of
  :mod:`optimizer.training.newsvendor` says why that is the level to reserve: a reserved GPU at level ``r`` saves
  the on-demand price in the hours the refused GPUs exceed ``r`` and the spot price in those where
  only the demand does; with a flat demand at ``L`` it pays up to exactly ``refused_gpus(L)``. A
  demand that moves within the week needs less or more of it: the scan tries :data:`CAP_LEVELS`
  times it, at each forecast quantile of the daily layer;
* **a book where a reservation is cheaper than spot with its interruptions**
  (:func:`reserving_pays`, :func:`optimizer.training.newsvendor.effective_spot_price`): the reservation pays on
  its own; ``reservation_basis="forecast"`` (a ratio of the weekly level) at :data:`RATIO_LEVELS`.

A GPU cap far above the pool's level refuses nothing, so its reservation is 0 and the capped scan
replays the uncapped policies. Any other book leaves the space as it is: the same grid, the same
figures.

**Minimum term.** The replay holds every reservation for ``reserved_min_term_days``
(:func:`optimizer.book.purchase.held_reservation`), so a level the policy lowers before its term ends is
paid until then, and the scan ranks reservation levels on what they would cost. The level is the
weekly forecast's (the replay's weekly cadence); a term longer than that week commits a level the
forecast has not seen for the rest of the term, which :func:`committed_note` says.
"""

from __future__ import annotations

import dataclasses

from optimizer.book.prices import GpuPrice
from optimizer.book.purchase import spot_terms
from optimizer.book.whole_units import EPS
from optimizer.training.newsvendor import effective_spot_price

#: multiples of the GPUs the spot cap refuses at the weekly level that the scan reserves
CAP_LEVELS = [0.0, 0.5, 0.75, 1.0, 1.25]
#: ratios of the weekly level that the scan reserves when a reservation is cheaper than spot
RATIO_LEVELS = [0.0, 0.25, 0.5, 0.75, 1.0]
#: the weekly forecast's horizon, days: the longest term a reservation level is sized for
WEEK_DAYS = 7.0


def caps_spot(price: GpuPrice) -> bool:
    """The price book entry limits spot (``spot_cap_gpus`` or ``spot_cap_share`` set)."""
    return price.spot_cap_gpus is not None or price.spot_cap_share is not None


def reserving_pays(price: GpuPrice, interruption_rate: float, recovery_s: int) -> bool:
    """A reserved GPU-hour is cheaper than a spot GPU-hour with its interruption losses
    (:func:`optimizer.training.newsvendor.effective_spot_price`; the GPU model's own interruption terms win)."""
    return price.reserved < effective_spot_price(price, *spot_terms(price, interruption_rate, recovery_s))


def basis(price: GpuPrice, interruption_rate: float, recovery_s: int) -> str | None:
    """The reservation basis the book calls for (module docstring): ``forecast`` when a reservation
    is cheaper than spot, else ``spot_cap`` when the book caps spot, else None (nothing to add)."""
    if reserving_pays(price, interruption_rate, recovery_s):
        return "forecast"
    return "spot_cap" if caps_spot(price) else None


def committed_layer(space, price: GpuPrice | None, interruption_rate: float = 0.01, recovery_s: int = 1800):
    """The training search space ``space`` (:class:`optimizer.search.space.Space`) with the committed layer
    the book calls for (:func:`basis`): its ``reservation_ratio`` scan values (:data:`CAP_LEVELS` or
    :data:`RATIO_LEVELS`, kept within the space's bounds) and ``reservation_basis`` fixed into every
    policy. ``space`` itself when ``price`` is None or the book calls for nothing (the default book)."""
    how = basis(price, interruption_rate, recovery_s) if price is not None else None
    if how is None:
        return space
    dim = next(d for d in space.dims if d.name == "reservation_ratio")
    levels = [v for v in (CAP_LEVELS if how == "spot_cap" else RATIO_LEVELS) if dim.low - EPS <= v <= dim.high + EPS]
    return dataclasses.replace(space, grid={**space.grid, "reservation_ratio": levels or [dim.low]},
                               fixed={**space.fixed, "reservation_basis": how})


def committed_note(mix: dict | None, price: GpuPrice, params: dict | None, interruption_rate: float,
                   recovery_s: int) -> str | None:
    """The report's note on why a training plan carries reserved GPUs (its ``mix``, GPU-hours per
    layer, :func:`optimizer.book.purchase.purchase_mix`; ``params`` the recommended policy's, None for a
    rival such as the baseline): the cap that refuses spot or the price that makes a reservation
    cheaper than spot, the term it is held for, and the level it is sized from (with ``params``).
    None when the plan reserves nothing."""
    if not mix or float(mix.get("reserved", {}).get("gpu_hours", 0.0)) <= 0:
        return None
    total = sum(float(mix[k]["gpu_hours"]) for k in mix) or 1.0
    share = float(mix["reserved"]["gpu_hours"]) / total
    eff = effective_spot_price(price, *spot_terms(price, interruption_rate, recovery_s))
    p = params or {}
    how = p.get("reservation_basis") if params else basis(price, interruption_rate, recovery_s)
    level = (f". The reservation is {p.get('reservation_ratio', 0):g} x "
             + ("the GPUs the cap refuses at " if how == "spot_cap" else "")
             + f"the weekly forecast's {p.get('quantile')} level" if params else "")
    term = price.reserved_min_term_days
    held = (f"each reservation is held at least {term:g} days (reserved_min_term_days)"
            + ("" if term <= WEEK_DAYS else f", longer than the {WEEK_DAYS:g}-day weekly forecast it is sized "
               "from, so the plan assumes that week's level for the rest of the term"))
    if how == "spot_cap" and caps_spot(price):
        cap = " and ".join(x for x in (
            f"{price.spot_cap_share:.0%} of the GPUs bought (spot_cap_share)" if price.spot_cap_share is not None
            else "",
            f"{price.spot_cap_gpus:g} GPUs (spot_cap_gpus)" if price.spot_cap_gpus is not None else "") if x)
        why = (f"the price book caps spot at {cap}, and the GPUs the cap refuses would be bought on demand at "
               f"{price.on_demand:g} USD per GPU-hour; reserved at {price.reserved:g} they cost less{level}")
    elif reserving_pays(price, interruption_rate, recovery_s):
        why = (f"a reservation ({price.reserved:g} USD per GPU-hour) is cheaper than spot with its "
               f"interruptions (about {eff:.3g}){level}")
    else:
        why = (f"the recommended policy commits them, although spot, about {eff:.3g} USD per GPU-hour with "
               f"its interruptions, is cheaper than reserved ({price.reserved:g}){level}")
    return (f"purchase: {share:.0%} of the GPU-hours bought are reserved ({mix['reserved']['gpu_hours']:,.0f}) "
            f"because {why}; {held}")


__all__ = ["CAP_LEVELS", "RATIO_LEVELS", "basis", "caps_spot", "committed_layer", "committed_note", "reserving_pays"]
