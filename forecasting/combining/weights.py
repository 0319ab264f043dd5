"""Combine the models per lead bucket and quantile level by exponentially weighted losses.

Members
    Every model that forecasts into a band (:data:`forecasting.combining.buckets.BANDS`):
    the tiers plus ``naive`` (last value), ``seasonal_naive`` and the robust
    members ``level``, ``revert`` and ``profile`` (:mod:`forecasting.tiers.robust`). GPU demand
    is step-shaped and persistence is hard to beat at short leads, so the
    combination starts from naive and moves away from it only as fast as the
    evidence allows.

Weights (per series, lead bucket and quantile level ``q``)
    Exponentially weighted average forecaster, the "Hedge" rule of Freund &
    Schapire (1997) and Cesa-Bianchi & Lugosi (2006, ch. 2), with a prior
    (Vovk's aggregating algorithm, 1990) that puts :data:`PRIOR_NAIVE` of the
    mass on naive and shares the rest equally (at 1 h with the hourly tier alone,
    :data:`PRIOR_MEMBERS`)::

        w_m  ∝  prior_m · exp(-ETA · D · (L_m - L_naive) / L_naive)

    * ``L_m`` is member ``m``'s mean pinball loss at level ``q`` (for ``p50``
      half the absolute error, the loss behind MASE) over the bucket's rows
      whose target was already observed, each row discounted by the age of
      its target with half-life :data:`HALF_LIFE` (recent record counts more,
      so a change of regime moves the weights within days);
    * ``D`` is the amount of evidence in days of realised targets (the
      discounted row weights, in days), so the weights leave the prior
      continuously as evidence accumulates: with none they are the prior,
      and a member 10 % better than naive over ``D`` effective days gains a
      factor ``exp(0.1 · ETA · D)`` on it;
    * losses are relative to naive's, so ``ETA`` has no unit and is the same
      for every series; it is set per lead band (:data:`ETA`: fast at 1 h,
      where persistence is nearly unbeatable and the record arrives within the
      hour, slower at 24 h and 7 d).

    The combined quantile of level ``q`` is the weighted mean of the members'
    quantiles of that level (averaging quantiles level by level: Lichtendahl,
    Grushka-Cockayne & Winkler 2013). The caller raises each level to at least
    the one below it (:func:`forecasting.types.sanitise_quantiles`).

No look-ahead
    The weights used at origin ``o`` come from rows with target ``<= o``
    inside a trailing :data:`LOOKBACK` (:func:`combine_online`). The plan
    forecast uses the weights at the last observation (:func:`learn_combination`).

Defaults (:data:`ETA`, :data:`HALF_LIFE`, :data:`PRIOR_NAIVE`) were chosen on
the tuning windows of the whole embedded sample, the same values for every
series and band (the alternatives tried are in ``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from forecasting.combining import conformal
from forecasting.combining.buckets import BANDS, BUCKETS, band_of, bucket_of, buckets_in
from forecasting.metrics import pinball_loss
from forecasting.types import FORECAST_COLUMNS, QCOLS, QUANTILES

REFERENCE = "naive"  #: the member the prior favours and losses are relative to
#: prior weight of naive per lead band; the other members share the rest equally. At 24 h and 7 d
#: 0.3 with the robust members (tuning windows, members level + revert +
#: profile: median MASE / best of {naive, seasonal-naive, default Prophet} 0.938 / 1.043 with 0.3,
#: 0.948-0.961 / 1.053-1.080 with 0.5 and two to five robust members; 0.971 / 1.071 without them;
#: 0.3 put one series less in [0.90, 0.98] at 24 h and at 7 d there). At 1 h the prior is shared
#: by naive and the hourly tier alone (:data:`PRIOR_MEMBERS`), half each: the hourly tier forecasts
#: the last value wherever it cannot beat it over its fit window (:mod:`forecasting.tiers.hourly_ets`),
#: so the share costs nothing there and the record moves the weight within hours where it can
#: (tuning windows: the web service's 1 h MASE 0.941 x naive's, every other series 1.000; with
#: the prior spread over every member instead, 1.034-1.015 at 0.5-0.8, so the 1 h band was naive)
PRIOR_NAIVE: dict[str, float] = {"1h": 0.5, "24h": 0.3, "7d": 0.3}
#: learning rate per day of evidence, on losses relative to naive's, per lead band: persistence
#: is nearly unbeatable at 1 h, so there the weights follow the record fast (chosen on the
#: tuning windows from 2, 5, 10, 20, 50, 100; README "Results on the embedded sample")
ETA: dict[str, float] = {"1h": 20.0, "24h": 2.0, "7d": 5.0}
#: per lead band, the members that share the prior mass left by naive (absent: every member). At 1 h
#: only the band's own tier (:data:`forecasting.combining.buckets.OWNER`): the others (the day and week models, the
#: robust levels, seasonal-naive) are built for longer leads; on the sample's tuning windows at 1 h each
#: was worse than persistence on every series but one, where the best of them was 0.4 % better
#: (MASE / naive's, medians: daily 1.08, revert 1.05, weekly 2.7, level 5.0, profile 5.0, seasonal-naive
#: 5.6), so a prior share for them is a cost with little chance of a gain
PRIOR_MEMBERS: dict[str, tuple[str, ...]] = {"1h": ("hourly",)}
HALF_LIFE = pd.Timedelta("3D")  #: age at which a realised row counts half
LOOKBACK = pd.Timedelta("21D")  #: realised rows older than this are ignored
DAY_NS = pd.Timedelta("1D").value


def _aligned(frames: dict[str, pd.DataFrame], band: str) -> tuple[pd.DataFrame, list[str]]:
    """Wide frame keyed by (issued_at, timestamp) with ``<model>:<q>`` columns for
    the rows every member forecasts in ``band``."""
    parts, names = [], []
    for name, f in frames.items():
        if f.empty:
            continue
        g = f[band_of(f["timestamp"] - f["issued_at"]) == band]
        if g.empty:
            continue
        g = g.set_index(["issued_at", "timestamp"])[list(QCOLS)]
        g.columns = [f"{name}:{q}" for q in QCOLS]
        parts.append(g[~g.index.duplicated()])
        names.append(name)
    if not parts:
        return pd.DataFrame(), []
    wide = pd.concat(parts, axis=1, join="inner").sort_index()
    return wide, names


def prior(names: list[str], prior_naive: float = PRIOR_NAIVE["24h"], share: tuple[str, ...] | None = None
          ) -> np.ndarray:
    """Prior weights over ``names``: ``prior_naive`` on naive (when present), the rest shared
    equally by the members named in ``share`` (every other member when ``share`` is None or
    names none present; the others get 0); equal weights when naive is absent or alone."""
    n = len(names)
    if REFERENCE not in names or n == 1:
        return np.full(n, 1.0 / n)
    takers = np.array([nm != REFERENCE and (not share or nm in share) for nm in names])
    if not takers.any():
        takers = np.array([nm != REFERENCE for nm in names])
    p = np.where(takers, (1.0 - prior_naive) / takers.sum(), 0.0)
    p[names.index(REFERENCE)] = prior_naive
    return p


def band_eta(eta: float | dict[str, float], band: str) -> float:
    """The value of ``band`` of a per-band constant (learning rate, prior): ``eta[band]``
    for a per-band dict, else ``eta``."""
    return float(eta[band]) if isinstance(eta, dict) else float(eta)


def hedge_weights(loss: np.ndarray, days: float, names: list[str], eta: float = ETA["24h"],
                  prior_naive: float = PRIOR_NAIVE["24h"], share: tuple[str, ...] | None = None) -> np.ndarray:
    """Weights of the members (module docstring) from their mean losses ``loss`` (one per
    name, same unit) over ``days`` days of evidence. Members with a non-finite loss get 0;
    no evidence (``days == 0``) gives the prior (:func:`prior` with ``prior_naive`` and ``share``)."""
    p = prior(names, prior_naive, share)
    ok = np.isfinite(loss)
    if days <= 0 or not ok.any():
        return p
    ref = loss[names.index(REFERENCE)] if REFERENCE in names and ok[names.index(REFERENCE)] else np.nanmin(loss)
    if ref <= 0:  # the reference is perfect on the evidence: relative losses from the mean instead
        ref = float(np.nanmean(loss[ok]))
    rel = np.zeros(len(loss)) if ref <= 0 else (np.where(ok, loss, np.inf) - ref) / ref
    with np.errstate(divide="ignore"):  # a prior weight of 0 keeps that member at 0
        z = np.log(p) - eta * days * rel
    z = np.where(ok, z, -np.inf)
    w = np.exp(z - z.max())
    return w / w.sum()


class _Bucket:
    """Realised rows of one lead bucket with each member's pinball loss, sorted by target."""

    def __init__(self, t8: np.ndarray, vals: np.ndarray, y: np.ndarray, rows: np.ndarray):
        """``t8``: targets (ns); ``vals``: ``(rows, members, levels)`` quantiles; ``rows``: this bucket's."""
        obs = rows[np.isfinite(y[rows]) & np.isfinite(vals[rows]).all(axis=(1, 2))]
        obs = obs[np.argsort(t8[obs], kind="stable")]
        self.t = t8[obs]
        # (rows, members, levels)
        self.loss = pinball_loss(y[obs, None, None], vals[obs], np.asarray(QUANTILES)[None, None, :])

    def state(self, at: int, half_life: pd.Timedelta = HALF_LIFE, lookback: pd.Timedelta = LOOKBACK
              ) -> tuple[np.ndarray, float]:
        """Discounted mean losses ``(members, levels)`` and days of evidence at time ``at`` (ns)."""
        hi = np.searchsorted(self.t, at, side="right")
        lo = np.searchsorted(self.t, at - lookback.value, side="right")
        if hi <= lo:
            return np.full(self.loss.shape[1:], np.nan), 0.0
        t = self.t[lo:hi]
        d = np.exp2(-(at - t) / half_life.value)
        span = max(float(t[-1] - t[0]), float(pd.Timedelta("5min").value)) / DAY_NS  # days the rows cover
        days = float(d.sum()) * span / len(t)  # discounted rows, in days of targets
        return np.tensordot(d, self.loss[lo:hi], axes=(0, 0)) / d.sum(), days


def _band_inputs(frames, band, actual):
    if not actual.index.is_unique:
        raise ValueError("actual: duplicate timestamps; regularise the series first (forecasting.regularise)")
    wide, names = _aligned(frames, band)
    if wide.empty:
        return None
    iss = pd.DatetimeIndex(wide.index.get_level_values(0))
    ts = pd.DatetimeIndex(wide.index.get_level_values(1))
    y = actual.reindex(ts).to_numpy(dtype="float64")
    vals = np.stack([wide[[f"{n}:{q}" for q in QCOLS]].to_numpy(dtype="float64") for n in names], axis=1)
    return wide, names, iss, ts.as_unit("ns").asi8, vals, y, bucket_of(ts - iss)


def _entry(names: list[str], loss: np.ndarray, days: float, weights: np.ndarray) -> dict:
    return {"weights": {n: float(w) for n, w in zip(names, weights)},
            "pinball": {n: (float(v) if np.isfinite(v) else None) for n, v in zip(names, loss)},
            "evidence_days": round(days, 3)}


def learn_combination(frames: dict[str, pd.DataFrame], actual: pd.Series, at: pd.Timestamp | None = None,
                      eta: float | dict[str, float] = ETA, half_life: pd.Timedelta = HALF_LIFE,
                      prior_naive: float | dict[str, float] = PRIOR_NAIVE) -> dict[str, dict]:
    """Weights per band, lead bucket and quantile level at time ``at`` (module docstring).

    Parameters
    ----------
    frames: model name -> rolling forecasts of ONE series (forecast frame:
        ``series_id, tier, issued_at, timestamp, p50, p90, p95, p99``; GPUs or replicas).
    actual: the series' actuals indexed by timestamp (5-minute grid, same unit).
    at: only targets at or before it count (default: the last observed actual).

    Returns
    -------
    ``{band: {bucket_label: {q: {"weights": {model: w}, "pinball": {model: loss},
    "evidence_days": float}}}}``; weights sum to 1.
    """
    if at is None:
        obs = actual.dropna()
        at = obs.index.max() if len(obs) else pd.Timestamp.min.tz_localize("UTC")
    at8 = pd.Timestamp(at).as_unit("ns").value
    spec = {}
    for band in BANDS:
        got = _band_inputs(frames, band, actual)
        if got is None:
            continue
        wide, names, _, t8, qv, y, bucket = got
        spec[band] = {}
        for b in buckets_in(band):
            loss, days = _Bucket(t8, qv, y, np.flatnonzero(bucket == b)).state(at8, half_life)
            spec[band][BUCKETS[b][0]] = {
                q: _entry(names, loss[:, j], days, hedge_weights(loss[:, j], days, names, band_eta(eta, band),
                                                             band_eta(prior_naive, band), PRIOR_MEMBERS.get(band)))
                for j, q in enumerate(QCOLS)}
    return spec


def apply_combination(frames: dict[str, pd.DataFrame], spec: dict[str, dict], series_id: str) -> pd.DataFrame:
    """Combined forecast frame (``tier = "combined"``) from :func:`learn_combination`'s
    weights, for every (origin, target) of a specified band where its members all have
    a forecast. A member with no forecast in ``frames`` is dropped (weights renormalised)."""
    parts = []
    for band, bspec in spec.items():
        got = _band_inputs(frames, band, pd.Series(dtype="float64", index=pd.DatetimeIndex([], tz="UTC")))
        if got is None:
            continue
        wide, names, _, _, qv, _, bucket = got
        vals = np.full((len(wide), len(QCOLS)), np.nan)
        for b in buckets_in(band):
            label = BUCKETS[b][0]
            m = bucket == b
            if label not in bspec or not m.any():
                continue
            for j, q in enumerate(QCOLS):
                w = np.array([bspec[label][q]["weights"].get(n, 0.0) for n in names])
                if w.sum() <= 0:
                    w = prior(names, band_eta(PRIOR_NAIVE, band), PRIOR_MEMBERS.get(band))
                vals[m, j] = qv[m, :, j] @ (w / w.sum())
        parts.append(_band_frame(wide, vals))
    return _finish(parts, series_id)


def combine_online(frames: dict[str, pd.DataFrame], actual: pd.Series, series_id: str,
                   eta: float | dict[str, float] = ETA, half_life: pd.Timedelta = HALF_LIFE,
                   prior_naive: float | dict[str, float] = PRIOR_NAIVE
                   ) -> tuple[pd.DataFrame, dict[str, dict[str, float]]]:
    """Rolling combination with no look-ahead: each origin ``o`` is combined with the
    weights :func:`learn_combination` would give at ``o`` (targets ``<= o`` only).

    Returns ``(combined frame, {band: {model: mean p50 weight over the origins}})``.
    """
    parts, mean_w = [], {}
    for band in BANDS:
        got = _band_inputs(frames, band, actual)
        if got is None:
            continue
        wide, names, iss, t8, qv, y, bucket = got
        vals = np.full((len(wide), len(QCOLS)), np.nan)
        i8 = iss.as_unit("ns").asi8
        w50 = []
        for b in buckets_in(band):
            rows = np.flatnonzero(bucket == b)
            if not len(rows):
                continue
            hist = _Bucket(t8, qv, y, rows)
            for o in np.unique(i8[rows]):
                loss, days = hist.state(int(o), half_life)
                target = rows[i8[rows] == o]
                for j in range(len(QCOLS)):
                    w = hedge_weights(loss[:, j], days, names, band_eta(eta, band), band_eta(prior_naive, band),
                                      PRIOR_MEMBERS.get(band))
                    vals[target, j] = qv[target, :, j] @ w
                    if j == 0:
                        w50.append(w)
        mean_w[band] = {n: float(v) for n, v in zip(names, np.mean(w50, axis=0))} if w50 else {}
        parts.append(_band_frame(wide, vals))
    return _finish(parts, series_id), mean_w


def _band_frame(wide: pd.DataFrame, vals: np.ndarray) -> pd.DataFrame:
    keep = np.isfinite(vals).all(axis=1)
    f = pd.DataFrame(vals[keep], columns=list(QCOLS))
    f.insert(0, "timestamp", wide.index.get_level_values(1)[keep])
    f.insert(0, "issued_at", wide.index.get_level_values(0)[keep])
    return f


def _finish(parts: list[pd.DataFrame], series_id: str) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame(columns=FORECAST_COLUMNS)
    res = pd.concat(parts, ignore_index=True).sort_values(["issued_at", "timestamp"], ignore_index=True)
    res.insert(0, "tier", "combined")
    res.insert(0, "series_id", series_id)
    return res[FORECAST_COLUMNS]


def members(spec: dict[str, dict], q: str = "p50", floor: float = 0.05) -> dict[str, dict[str, float]]:
    """Members that carry weight: ``{bucket_label: {model: weight}}`` for level ``q``,
    keeping weights >= ``floor``, largest first (what report.json and the dashboard show)."""
    out = {}
    for bspec in spec.values():
        for label, qs in bspec.items():
            w = qs[q]["weights"]
            out[label] = {n: round(v, 3) for n, v in sorted(w.items(), key=lambda kv: -kv[1]) if v >= floor}
    return out


def combination_report(spec: dict[str, dict], mean_weights: dict[str, dict[str, float]],
                       offsets: dict[str, list[float]], levels: dict[str, list[float]]) -> dict:
    """The report's ``combination`` entry for one series (report.json, dashboard Forecasts page).

    ``spec``: :func:`learn_combination` at the last observation (the plan forecast's
    weights); ``mean_weights``: :func:`combine_online`'s mean p50 weight per band over the
    rolling origins; ``offsets`` / ``levels``: the plan forecast's calibration
    (:mod:`forecasting.combining.conformal`). ``members`` lists, per lead bucket, the models
    carrying at least 5 % of the p50 weight.
    """
    return {
        "method": (f"exponentially weighted losses per lead bucket and quantile (Hedge, eta per day of evidence "
                   f"{', '.join(f'{b} {e:g}' for b, e in ETA.items())}, half-life {HALF_LIFE.days} days, "
                   "prior on naive "
                   f"{', '.join(f'{b} {p:g}' for b, p in PRIOR_NAIVE.items())})"),
        "calibration": (f"online adaptive split conformal around {conformal.CENTRE or 'each quantile'}, "
                        f"trailing {conformal.CAL_WINDOW.days} days per lead bucket"),
        "members": members(spec),
        "rolling": {"mean_p50_weights": mean_weights},
        "final": {"combination": spec, "calibration": offsets, "levels": levels},
    }
