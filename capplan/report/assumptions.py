"""The price book's assumptions that move the headline, stated before the saving.

A plan's saving against the baseline rests on what the price book lets it buy. Two assumptions move
it most, and neither is a list figure the book can cite:

* **How much spot there is.** The built-in book (:func:`optimizer.book.prices.default_price_book`) sets
  no spot cap (``spot_cap_gpus`` / ``spot_cap_share``), so a training pool may buy every GPU on spot
  when spot, interruptions priced in, is the cheapest layer. GPU spot is scarce: AWS's default Spot
  Instance quotas for its GPU families ("All P4, P3 and P2", "All P5", "All G and VT Spot Instance
  Requests") are 0 vCPUs until raised (AWS EC2 User Guide, "Spot Instance quotas",
  docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html), and Google Cloud sells Spot VMs
  from excess capacity whose availability varies (cloud.google.com/compute/docs/instances/spot). What an
  account gets is its own grant, so the book does not guess one; the first lines under the plan
  table, the dashboard's Fleet page and ``report.json``'s ``summary.assumptions`` say so instead.
* **How often spot is interrupted**: ``interruption_rate`` per spot GPU-hour and ``recovery_s``
  GPU-seconds lost per interruption (``plan.*``, or per GPU model ``prices.<model>.*``).

And, third, whose prices: the built-in AWS us-east-1 list prices (reserved 0.60 x and spot 0.40 x
on demand) or the configuration's.

:func:`assumptions` reads them from a report document (``run.prices``: the book used, with the
interruption figures each model was replayed with; ``series``: which GPU models the training pools
use; ``summary.mix``-like totals of the recommended mix), so an older report gives what it recorded.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from optimizer.book.prices import ALIASES, default_price_book

SPOT_QUOTA_SOURCE = "AWS's default spot quota for GPU instances is 0 vCPUs until raised"


class Assumption(BaseModel):
    """One assumption of the run's price book that moves the headline figures."""

    topic: str = Field(description="spot_cap, spot_interruptions or prices")
    text: str = Field(description="what the run assumed, in one line")
    setting: str = Field(description="the configuration setting that changes it")


def _models(series: dict, kind: str | None = None) -> list[str]:
    return sorted({e.get("gpu_model", "default") for e in series.values() if kind is None or e.get("kind") == kind})


def _entry(prices: dict, model: str) -> dict | None:

    return prices.get(model) or prices.get(ALIASES.get(model, "")) or prices.get("default")


def _spot_share(mix: dict | None) -> float | None:
    if not mix:
        return None
    hours = sum(v.get("gpu_hours", 0.0) for v in mix.values())
    return mix.get("spot", {}).get("gpu_hours", 0.0) / hours if hours > 0 else None


def assumptions(report: dict, mix: dict | None = None) -> list[Assumption]:
    """The run's headline assumptions (module docstring), most decisive first: the spot cap (only with
    training pools, which buy spot), the spot interruptions (when ``run.prices`` records them) and the
    prices' origin. ``report``: a ``report.json`` document (``{"run": {"prices": ...}, "series": ...}``);
    ``mix``: the recommended fleet's purchase mix (``{layer: {gpu_hours, cost_usd}}``), whose spot share
    the spot line quotes. Empty when the report records no price book."""
    run = report.get("run") or {}
    prices = run.get("prices") or {}
    series = report.get("series") or {}
    if not prices:
        return []
    out = []
    training = _models(series, "training")
    if training:
        entries = {m: _entry(prices, m) or {} for m in training}
        uncapped = [m for m, e in entries.items() if e.get("spot_cap_gpus") is None and e.get("spot_cap_share") is None]
        share = _spot_share(mix)
        bought = f", {100 * share:.0f} % of the recommended GPU-hours" if share is not None else ""
        if uncapped:
            out.append(Assumption(
                topic="spot_cap", setting="prices.<gpu model>.spot_cap_share or spot_cap_gpus",
                text=f"no spot cap for {', '.join(uncapped)}: the plan buys as much spot as is cheapest{bought}; "
                     f"GPU spot is scarce: {SPOT_QUOTA_SOURCE}"))
        else:
            caps = "; ".join(f"{m} " + (f"{e['spot_cap_gpus']:g} GPUs" if e.get("spot_cap_gpus") is not None
                                        else f"{100 * e['spot_cap_share']:.0f} % of the GPUs bought")
                             for m, e in entries.items())
            out.append(Assumption(topic="spot_cap", setting="prices.<gpu model>.spot_cap_share or spot_cap_gpus",
                                  text=f"spot capped at {caps}{bought}"))
        rates = {(e.get("interruption_rate"), e.get("recovery_s")) for e in entries.values()}
        if all(r is not None and s is not None for r, s in rates):
            figs = ", ".join(f"{r:g} per spot GPU-hour, {s:,} GPU-seconds lost each" for r, s in sorted(rates))
            out.append(Assumption(topic="spot_interruptions", text=f"spot interruptions: {figs}",
                                  setting="plan.interruption_rate and plan.recovery_s (per GPU model: "
                                          "prices.<gpu model>.interruption_rate, recovery_s)"))
    built_in = default_price_book()
    used = _models(series)
    own = [m for m in used if (e := _entry(prices, m)) is not None and m in built_in
           and any(e.get(k) != getattr(built_in[m], k) for k in ("on_demand", "reserved", "spot"))]
    text = (f"prices: the configuration's for {', '.join(own)}" if own else
            "prices: the built-in AWS us-east-1 list prices (reserved 0.60 x, spot 0.40 x on demand), not a contract")
    out.append(Assumption(topic="prices", text=text, setting="prices.<gpu model>.on_demand, reserved, spot"))
    return out


def assumption_lines(items: list) -> list[str]:
    """One line per assumption (:class:`Assumption` or its dict): ``Assumes <text>. Set <setting>``."""
    out = []
    for a in items:
        a = a.model_dump() if hasattr(a, "model_dump") else a
        out.append(f"Assumes {a['text']}. Set {a['setting']}")
    return out
