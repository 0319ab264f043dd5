"""The multi-week selection in the fleet summary (:mod:`optimizer.search.multiweek`): how far the
recommendations' regret moved from week to week over the tuning weeks, and how well one
week's ranking of the scanned policies predicted the next week's.

Read from each series' ``tuning.weeks`` (training pools ranked by the ``weekly`` selection):
``weeks`` (complete weeks of evidence), ``chosen_week_regret`` (the recommendation's regret
per week, ratios), ``spread.range`` (max - min of those) and ``walk_forward[k].spearman`` /
``one_week_pick_next`` (tune on week ``k``, score on week ``k + 1``).
"""

from __future__ import annotations

import math

import numpy as np


def _median(values) -> float | None:
    v = [x for x in values if isinstance(x, (int, float)) and math.isfinite(x)]
    return float(np.median(v)) if v else None


def selection_summary(series: dict) -> dict | None:
    """``report["summary"]["selection"]`` from the report's ``series`` (id -> entry), or None when
    no series was ranked on weeks: ``series`` (how many), ``weeks`` (the most weeks of evidence),
    ``spread_range_median`` / ``spread_range_max`` (the recommendations' week-to-week regret
    range, ratio) with ``widest`` (the series of the max), ``spearman_median`` (the scanned
    policies' rank correlation between consecutive weeks, median over series and steps) and
    ``one_week_pick_next_median`` (what the policy one week alone would choose cost the next
    week, over the best there; 1.0 = its rank held)."""
    ranked = {sid: e["tuning"]["weeks"] for sid, e in series.items()
              if isinstance((e.get("tuning") or {}).get("weeks"), dict)}
    if not ranked:
        return None
    ranges = {sid: w["spread"]["range"] for sid, w in ranked.items() if w["spread"].get("range") is not None}
    steps = [s for w in ranked.values() for s in w.get("walk_forward", [])]
    widest = max(ranges, key=ranges.get) if ranges else None
    return {"series": len(ranked), "weeks": max(w["weeks"] for w in ranked.values()),
            "spread_range_median": _median(ranges.values()),
            "spread_range_max": ranges[widest] if widest else None, "widest": widest,
            "spearman_median": _median(s["spearman"] for s in steps),
            "one_week_pick_next_median": _median(s["one_week_pick_next"] for s in steps)}


def selection_lines(sel: dict | None) -> list[str]:
    """The summary's line for :func:`selection_summary` (none without it)."""
    if not sel:
        return []
    line = (f"Selection on up to {sel['weeks']} week(s) before the evaluation window ({sel['series']} training "
            f"pools, each ranked by its worst week)")
    if sel["spread_range_median"] is not None:
        line += (f": the recommendation's regret moved {sel['spread_range_median']:.3f} from week to week "
                 f"(median; widest {sel['spread_range_max']:.3f}, {sel['widest']})")
    if sel["spearman_median"] is not None:
        line += (f"; one week's ranking of the scanned policies predicted the next week's with Spearman "
                 f"{sel['spearman_median']:.2f}, and its pick cost {sel['one_week_pick_next_median']:.3f} x the "
                 f"next week's best (medians)")
    return [line]
