"""The purchase mix as shares, for people: reserved, spot and on-demand.

A policy's score dict in report.json may carry ``mix``: ``{"reserved": {"gpu_hours",
"cost_usd"}, "spot": {...}, "on_demand": {...}}`` (GPU-hours and USD on the evaluation
window; on-demand includes the hourly top-up; an inference service has all of its
replica GPU-hours on demand), and ``summary.mix`` the same for the recommended fleet.
Runs from before the mix was recorded have neither: every reader here returns None
and the text says ``mix not recorded``. Shares are ``part / sum of the three parts``
(ratios 0-1), computed here, never stored.
"""

from __future__ import annotations

from typing import Any

#: the parts of a mix, in display order, and their labels
PARTS = {"reserved": "reserved", "spot": "spot", "on_demand": "on-demand"}
#: the two measures of a mix: key -> label
MEASURES = {"gpu_hours": "GPU-hours", "cost_usd": "USD"}
NOT_RECORDED = "mix not recorded"


def mix_of(scores: Any) -> dict | None:
    """The ``mix`` of a score dict (or a pydantic model carrying one, or its extra
    fields), as a plain dict; None when absent or not a mapping."""
    if scores is None:
        return None
    if isinstance(scores, dict):
        mix = scores.get("mix")
    else:
        mix = getattr(scores, "mix", None)
        if mix is None and getattr(scores, "model_extra", None):
            mix = scores.model_extra.get("mix")
    if mix is not None and hasattr(mix, "model_dump"):
        mix = mix.model_dump()
    return mix if isinstance(mix, dict) else None


def shares(mix: dict | None) -> dict[str, dict[str, float]] | None:
    """``measure -> part -> share`` (ratios 0-1 summing to 1 per measure) of a mix; a
    measure whose parts sum to 0 has no shares (absent). None when ``mix`` is None."""
    if mix is None:
        return None
    out: dict[str, dict[str, float]] = {}
    for m in MEASURES:
        vals = {p: float((mix.get(p) or {}).get(m) or 0.0) for p in PARTS}
        total = sum(vals.values())
        if total > 0:
            out[m] = {p: v / total for p, v in vals.items()}
    return out


def short(mix: dict | None, measure: str = "gpu_hours") -> str:
    """``"10/85/5"``: reserved/spot/on-demand percent of ``measure`` (whole percents);
    ``"n/a"`` without a mix or with nothing bought."""
    s = (shares(mix) or {}).get(measure)
    if not s:
        return "n/a"
    return "/".join(f"{100 * s[p]:.0f}" for p in PARTS)


def csv_fields(mix: dict | None) -> dict[str, float | bool | None]:
    """CSV columns of a mix: ``mix_recorded`` (true | false: older runs and policies without one) and
    ``<part>_share_<measure>`` ratios rounded to 3 decimals (empty without a mix)."""
    s = shares(mix)
    row: dict[str, float | bool | None] = {"mix_recorded": s is not None}
    for m in MEASURES:
        for p in PARTS:
            v = (s or {}).get(m, {}).get(p)
            row[f"{p}_share_{m}"] = round(v, 3) if v is not None else None
    return row
