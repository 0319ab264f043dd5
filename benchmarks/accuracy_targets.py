"""The forecast-accuracy targets, checked on one backtest document (:mod:`benchmarks.accuracy`).

Every figure is a per-series ratio of MASEs on the evaluation window (rolling origins, no
look-ahead, :func:`forecasting.backtest.score`); the targets:

* median over series of MASE(combined) / the best MASE among the peers (naive, seasonal-naive,
  default Prophet, AutoETS): <= 0.98 at 1 h, <= 0.95 at 24 h, <= 0.97 at 7 d; the worst series
  is printed beside the median;
* 1 h: the hourly tier carries weight on at least a third of the series. Counted honestly: a
  series counts when the tier holds at least 5 % of the p50 weight in the band's last bucket
  *and* its 1 h forecast is not the last value (its MASE differs from naive's by more than
  0.1 %), since the tier forecasts the last value wherever it cannot beat it
  (:mod:`forecasting.tiers.hourly_ets`) and a weight on a copy of naive earns nothing;
* 7 d: the weekly tier alone below seasonal-naive: median over series of MASE(weekly) /
  MASE(seasonal-naive) < 1;
* on no series-band is the combination worse than its own best member (the models of
  :data:`forecasting.tiers.ROLLING_MODELS` scored there) by more than 10 %;
* at a lead-bucket boundary the combined p50 steps by no more than the largest member step,
  on every series (the counts of :func:`benchmarks.accuracy.boundary_steps`);
* p95 coverage in [0.90, 0.98] on at least 75 % of the series-bands with at least
  :data:`MIN_ROWS` evaluation rows.

A series whose best MASE is 0 (a flat evaluation window) has no ratio and is left out of that
target, and said so.
"""

from __future__ import annotations

import numpy as np

from forecasting.backtest import BEST_OF
from forecasting.combining.buckets import BANDS
from forecasting.tiers import ROLLING_MODELS

MEDIAN_TARGET = {"1h": 0.98, "24h": 0.95, "7d": 0.97}
MEMBER_SLACK = 1.10  #: the combination may be at most this times its best member's MASE
HOURLY_SHARE = 1 / 3  #: share of the series on which the hourly tier must carry weight
WEIGHT_FLOOR = 0.05  #: the p50 weight that counts as carrying weight (report.json's members)
MIN_ROWS = 20  #: series-bands with fewer evaluation rows are left out of the coverage target
COVERAGE_SHARE = 0.75


def ratio_to_best(row: dict, names, model: str = "combined") -> tuple[float, str | None]:
    """``(MASE(model) / the lowest MASE among names scored in row, that model)`` for one series-band
    ``row`` (``{model: {"mase": ...}}``); the ratio is NaN when the best MASE is 0, and the pair
    ``(NaN, None)`` when ``model`` or every one of ``names`` is missing there."""
    v = {m: row[m]["mase"] for m in names if m in row and m != model and np.isfinite(row[m]["mase"])}
    if model not in row or not v:
        return float("nan"), None
    best = min(v, key=v.get)
    return (float(row[model]["mase"] / v[best]) if v[best] > 0 else float("nan")), best


def peer_ratios(doc: dict, band: str) -> dict[str, float]:
    """Per series, MASE(combined) / its best peer in ``band`` (finite ratios only)."""
    out = {}
    for sid, s in doc["series"].items():
        r, _ = ratio_to_best(s["horizons"].get(band, {}), BEST_OF)
        if np.isfinite(r):
            out[sid] = r
    return out


def member_ratios(doc: dict) -> dict[tuple[str, str], tuple[float, str]]:
    """Per (series, band), MASE(combined) / its best member's and that member."""
    out = {}
    for sid, s in doc["series"].items():
        for band, row in s["horizons"].items():
            r, best = ratio_to_best(row, ROLLING_MODELS)
            if np.isfinite(r):
                out[(sid, band)] = (r, best)
    return out


def hourly_carriers(doc: dict) -> tuple[list[str], list[str]]:
    """``(series where the hourly tier holds >= WEIGHT_FLOOR of the last 1 h bucket's p50 weight,
    those of them where its 1 h forecast is not naive's)`` (module docstring)."""
    weighted, earning = [], []
    for sid, s in doc["series"].items():
        last = [b for b in s.get("members", {}) if b.startswith("1h:")]
        if not last or s["members"][last[-1]].get("hourly", 0.0) < WEIGHT_FLOOR:
            continue
        weighted.append(sid)
        row = s["horizons"].get("1h", {})
        h, n = row.get("hourly", {}).get("mase"), row.get("naive", {}).get("mase")
        if h is not None and n is not None and np.isfinite(h) and np.isfinite(n) and abs(h - n) > 1e-3 * max(n, 1e-12):
            earning.append(sid)
    return weighted, earning


def targets(doc: dict, boundary: dict[str, tuple[int, int, float]]) -> list[tuple[str, bool, str]]:
    """The targets of the module docstring on ``doc`` (:func:`capplan.cli.commands.backtest.run_backtest`'s
    document) and ``boundary`` (per series ``(pairs checked, pairs over, worst excess)``):
    ``[(target, met, figure)]``."""
    out = []
    for band in BANDS:
        r = peer_ratios(doc, band)
        if not r:
            continue
        worst = max(r, key=r.get)
        med = float(np.median(list(r.values())))
        out.append((f"{band}: median MASE(combined) / best peer <= {MEDIAN_TARGET[band]}", med <= MEDIAN_TARGET[band],
                    f"{med:.3f} over {len(r)} series; worst {r[worst]:.3f} ({worst})"))
    n1 = len(peer_ratios(doc, "1h")) or len(doc["series"])
    weighted, earning = hourly_carriers(doc)
    out.append(("1h: the hourly tier carries weight, and is not naive, on >= 1/3 of the series",
                len(earning) >= HOURLY_SHARE * n1,
                f"{len(earning)} of {n1} ({', '.join(earning) or 'none'}); weight >= {WEIGHT_FLOOR:g} on "
                f"{len(weighted)}"))
    wk = []
    for s in doc["series"].values():
        row = s["horizons"].get("7d", {})
        w, sn = row.get("weekly", {}).get("mase"), row.get("seasonal_naive", {}).get("mase")
        if w is not None and sn and np.isfinite(w) and np.isfinite(sn) and sn > 0:
            wk.append(w / sn)
    if wk:
        out.append(("7d: median MASE(weekly tier) / MASE(seasonal-naive) < 1", float(np.median(wk)) < 1,
                    f"{np.median(wk):.3f} over {len(wk)} series"))
    mr = member_ratios(doc)
    bad = {k: v for k, v in mr.items() if v[0] > MEMBER_SLACK}
    out.append((f"no series-band worse than its own best member by more than {MEMBER_SLACK - 1:.0%}", not bad,
                f"{len(bad)} of {len(mr)}: " + (", ".join(f"{s.split('/')[-1]} {b} {r:.2f} ({m})"
                                                     for (s, b), (r, m) in sorted(bad.items())) or "none")))
    over = {sid: v for sid, v in boundary.items() if v[1] > 0}
    out.append(("boundary: the combined p50 steps by no more than the largest member step, every series",
                not over, f"{len(over)} of {len(boundary)} series exceed"))
    cells = [(sid, band, row["combined"]["coverage_p95"]) for sid, s in doc["series"].items()
             for band, row in s["horizons"].items() if "combined" in row and row["combined"].get("n", 0) >= MIN_ROWS]
    inside = sum(0.90 <= c <= 0.98 for _, _, c in cells)
    out.append((f"p95 coverage in [0.90, 0.98] on >= {COVERAGE_SHARE:.0%} of series-bands with >= {MIN_ROWS} rows",
                bool(cells) and inside >= COVERAGE_SHARE * len(cells), f"{inside} of {len(cells)}"))
    return out
