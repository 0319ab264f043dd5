"""Combine the models per lead bucket and quantile, then calibrate conformally.

Lead buckets
    Each lead band (``1h``, ``24h``, ``7d``) is split into lead buckets
    (:data:`BUCKETS`, e.g. ``24h:3h-6h``): persistence wins at five minutes,
    seasonal and calendar models at days, and the best model changes within a
    band. A bucket with too few realised rows borrows its band's pooled rows.

Combination (per series, lead bucket and quantile level)
    Candidates are every model that forecasts into the band (the tiers plus
    ``naive`` and ``seasonal_naive``: GPU demand is step-shaped, and
    persistence is hard to beat at short leads). Each quantile level ``q`` is
    combined on its own, scored by the pinball loss at ``q`` (for ``p50`` that
    is half the absolute error, the loss behind MASE), over these options:

    * each candidate alone;
    * the inverse-loss-weighted blend of all candidates;
    * the equal blend of the best two;
    * the equal blend of all candidates.

    The lowest loss wins, but only if a one-sided Diebold-Mariano test on
    per-issue-day (or, for leads past a day, per-block) mean losses says it
    beats ``naive`` (last value) at level
    :data:`ALPHA` (5 %); otherwise naive is kept (:func:`_beats`). Two weeks
    of step-shaped demand are a small sample: in the sample's backtests,
    blends that won the fitting rows by a few percent lost to persistence the
    week after, most of all at the 7-day band, where a week holds only seven
    origins (Timmermann 2006, "Forecast combinations", on the estimation
    error of combination weights and inverse-loss weights; Lichtendahl et al.
    2013 for averaging quantiles level by level). The caller then raises each level to at least the one
    below it (:func:`forecasting.types.sanitise_quantiles`), so combined
    quantiles never cross and ``p50`` is never moved.

Online choice, no look-ahead (:func:`combine_online`)
    For the origins issued on UTC day ``D`` the choice is made at the first
    of them from the rows whose target was already observed then, within a
    trailing ``lookback`` (14 days): a model's recent record counts, and a change of
    regime moves the choice within a day. The plan forecast uses the choice
    made at the last observation (:func:`learn_combination` on the trailing
    ``lookback``).

Calibration (per series, lead bucket and quantile level)
    Split-conformal offsets (Romano, Patterson & Candès 2019, "Conformalized
    Quantile Regression", one-sided form): the offset of level ``q`` is the
    ``ceil((n + 1) q) / n`` empirical quantile of ``actual - forecast_q`` over
    a calibration set, added to ``forecast_q``. In rolling evaluation the
    calibration set of an origin is its bucket's rows whose target was
    already observed at that origin, within a trailing window
    (:func:`calibrate_online`; sliding-window conformal in the spirit of Gibbs
    & Candès 2021, "Adaptive Conformal Inference Under Distribution Shift").
    Because the set holds only rows of the same lead bucket, it is not biased
    towards shorter leads, and offsets may narrow as well as widen. Only the
    upper levels (p90, p95, p99) are calibrated: ``p50`` is already chosen by
    its own loss, and shifting it by the trailing median error worsened MASE
    in the sample's backtests. The plan forecast uses the last window's
    offsets (:func:`learn_calibration`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecasting.metrics import pinball_loss
from forecasting.types import FORECAST_COLUMNS, QCOLS, QUANTILES

BANDS: dict[str, tuple[pd.Timedelta, pd.Timedelta]] = {
    "1h": (pd.Timedelta(0), pd.Timedelta("1h")),
    "24h": (pd.Timedelta("1h"), pd.Timedelta("24h")),
    "7d": (pd.Timedelta("24h"), pd.Timedelta("7D")),
}
OWNER = {"1h": "hourly", "24h": "daily", "7d": "weekly"}


def _bucket(band: str, lo: str, hi: str) -> tuple[str, str, pd.Timedelta, pd.Timedelta]:
    return f"{band}:{lo}-{hi}", band, pd.Timedelta(lo), pd.Timedelta(hi)


#: (label, band, lead_lo, lead_hi]: lead buckets, each inside one band.
BUCKETS: tuple[tuple[str, str, pd.Timedelta, pd.Timedelta], ...] = (
    _bucket("1h", "0min", "15min"), _bucket("1h", "15min", "30min"), _bucket("1h", "30min", "1h"),
    _bucket("24h", "1h", "3h"), _bucket("24h", "3h", "6h"), _bucket("24h", "6h", "12h"), _bucket("24h", "12h", "24h"),
    _bucket("7d", "1D", "2D"), _bucket("7d", "2D", "3D"), _bucket("7d", "3D", "5D"), _bucket("7d", "5D", "7D"),
)
DEFAULT = "naive"  # the option another must beat significantly (:func:`_beats`) to be chosen
ALPHA = 0.05  # one-sided level of that test
MIN_ROWS = 24  # fewer realised rows than this: a bucket borrows its band's rows
LOOKBACK = pd.Timedelta("14D")  # realised rows a combination is chosen on
CAL_WINDOW = pd.Timedelta("14D")  # realised rows the conformal offsets come from
ACI_GAMMA = 0.02  # step size of the adaptive level, per origin (calibrate_online)


def _lead_index(lead, edges: list[tuple[pd.Timedelta, pd.Timedelta]]) -> np.ndarray:
    lead = np.asarray(pd.to_timedelta(np.asarray(lead)).as_unit("ns").asi8)
    out = np.full(len(lead), -1)
    for i, (lo, hi) in enumerate(edges):
        out[(lead > lo.value) & (lead <= hi.value)] = i
    return out


def band_of(lead: pd.Series | pd.TimedeltaIndex) -> np.ndarray:
    """Band name per lead (``timestamp - issued_at``); '' outside every band."""
    names = list(BANDS)
    idx = _lead_index(lead, list(BANDS.values()))
    return np.array([names[i] if i >= 0 else "" for i in idx], dtype=object)


def bucket_of(lead: pd.Series | pd.TimedeltaIndex) -> np.ndarray:
    """Index into :data:`BUCKETS` per lead; -1 outside every bucket."""
    return _lead_index(lead, [(lo, hi) for _, _, lo, hi in BUCKETS])


def _aligned(frames: dict[str, pd.DataFrame], band: str) -> tuple[pd.DataFrame, list[str]]:
    """Wide frame keyed by (issued_at, timestamp) with ``<model>:<q>`` columns for
    the rows every candidate forecasts in ``band``."""
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


def _pin(y: np.ndarray, f: np.ndarray, q: float) -> float:
    return float(np.mean(pinball_loss(y, f, q)))


def _choose(preds: dict[str, np.ndarray], y: np.ndarray, q: float, groups: np.ndarray | None = None,
            block: int = 1) -> tuple[str, dict[str, float], float]:
    """The option with the lowest pinball loss at level ``q`` (module docstring).

    ``preds``: model -> forecasts of level ``q`` on the fitting rows; ``y``: actuals.
    Returns ``(label, weights, loss)``; ties go to the earlier option (singles
    first, in candidate order), so the choice is deterministic.
    """
    names = list(preds)
    loss = {n: _pin(y, preds[n], q) for n in names}
    options: list[tuple[str, dict[str, float]]] = [(n, {n: 1.0}) for n in names]
    if len(names) >= 2:
        inv = {n: 1.0 / max(loss[n], 1e-9) for n in names}
        options.append(("inverse_loss_blend", inv))
        top2 = sorted(names, key=lambda n: loss[n])[:2]
        options.append(("best_two_blend", {n: 1.0 for n in top2}))
        if len(names) > 2:
            options.append(("equal_blend", {n: 1.0 for n in names}))
    best = None
    for label, wt in options:
        val = loss[label] if label in loss else _pin(y, _blend_arr(preds, wt), q)
        if best is None or val < best[2] - 1e-12:
            best = (label, _normalised(wt), val)
    if DEFAULT in loss and best[0] != DEFAULT and groups is not None \
            and not _beats(y, preds[DEFAULT], _blend_arr(preds, best[1]), q, groups, block):
        return DEFAULT, {DEFAULT: 1.0}, loss[DEFAULT]
    return best


def _beats(y: np.ndarray, f_default: np.ndarray, f_best: np.ndarray, q: float, groups: np.ndarray,
           block: int = 1) -> bool:
    """One-sided Diebold-Mariano test (Diebold & Mariano 1995) that ``f_best`` has a lower
    pinball loss at level ``q`` than ``f_default``.

    ``groups`` are issue days (ns since the epoch, midnight UTC). The loss
    differences are averaged per block of ``block`` consecutive days: a day's
    forecasts reach up to ``block`` days ahead, so blocks that long barely share
    targets and their means are close to independent (a Newey-West variance
    with so few blocks is unreliable, and was too lenient on this data). The
    mean of the block means is tested with Student's t with ``n - 1`` degrees
    of freedom at level :data:`ALPHA` (the small-sample form Harvey, Leybourne
    & Newbold 1997 recommend). Fewer than 3 blocks: not significant.
    """
    from scipy.stats import t as student_t

    d = pinball_loss(y, f_default, q) - pinball_loss(y, f_best, q)
    day = (np.asarray(groups, dtype="int64") // pd.Timedelta("1D").value).astype("int64")
    _, inv = np.unique((day - day.min()) // max(block, 1), return_inverse=True)
    per = np.bincount(inv, weights=d) / np.bincount(inv)
    n = len(per)
    if n < 3:
        return False
    sd = per.std(ddof=1)
    if sd == 0:
        return bool(per.mean() > 0)
    return bool(per.mean() / (sd / np.sqrt(n)) > student_t.ppf(1 - ALPHA, n - 1))


def _normalised(w: dict[str, float]) -> dict[str, float]:
    tot = sum(w.values())
    return {n: float(v / tot) for n, v in w.items()}


def _blend_arr(preds: dict[str, np.ndarray], weights: dict[str, float]) -> np.ndarray:
    tot = sum(weights.values())
    return sum((w / tot) * preds[n] for n, w in weights.items())


def _learn_band(wide: pd.DataFrame, names: list[str], band: str, y: np.ndarray, bucket: np.ndarray,
                fit: np.ndarray) -> dict[str, dict]:
    """Per bucket of ``band`` and quantile: ``{bucket_label: {q: {"choice", "weights", "pinball", "n"}}}``.

    With fewer than :data:`MIN_ROWS` realised rows even for the whole band, the
    choice is :data:`DEFAULT` (naive), else the band's own tier: no evidence, no
    departure from persistence."""
    groups = pd.DatetimeIndex(wide.index.get_level_values(0)).floor("1D").as_unit("ns").asi8
    finite = np.isfinite(wide[[f"{n}:{q}" for n in names for q in QCOLS]].to_numpy()).all(axis=1)
    fit = fit & finite
    spec: dict[str, dict] = {}
    band_rows = fit & (bucket >= 0)
    for b, (label, bband, _, hi) in enumerate(BUCKETS):
        if bband != band:
            continue
        rows = fit & (bucket == b)
        if rows.sum() < MIN_ROWS:
            rows = band_rows
        if rows.sum() < MIN_ROWS:
            owner = next((n for n in (DEFAULT, OWNER[band]) if n in names), names[0])
            spec[label] = {q: {"choice": owner, "weights": {owner: 1.0}, "pinball": None, "n": int(rows.sum())}
                           for q in QCOLS}
            continue
        spec[label] = {}
        block = max(1, math.ceil(hi / pd.Timedelta("1D")))  # days a day's forecasts reach ahead
        for q, level in zip(QCOLS, QUANTILES):
            preds = {n: wide[f"{n}:{q}"].to_numpy()[rows] for n in names}
            choice, weights, loss = _choose(preds, y[rows], level, groups[rows], block)
            spec[label][q] = {"choice": choice, "weights": weights, "pinball": loss, "n": int(rows.sum())}
    return spec


def _apply_band(wide: pd.DataFrame, bucket: np.ndarray, spec: dict[str, dict], rows: np.ndarray,
                out: np.ndarray) -> None:
    for b, (label, _, _, _) in enumerate(BUCKETS):
        if label not in spec:
            continue
        m = rows & (bucket == b)
        if not m.any():
            continue
        for j, q in enumerate(QCOLS):
            w = spec[label][q]["weights"]
            out[m, j] = _blend_arr({n: wide[f"{n}:{q}"].to_numpy()[m] for n in w}, w)


def _band_frame(wide: pd.DataFrame, vals: np.ndarray, keep: np.ndarray) -> pd.DataFrame:
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


def _band_inputs(frames, band, actual):
    if not actual.index.is_unique:
        raise ValueError("actual: duplicate timestamps; regularise the series first (forecasting.regularise)")
    wide, names = _aligned(frames, band)
    if wide.empty:
        return None
    iss = pd.DatetimeIndex(wide.index.get_level_values(0))
    ts = pd.DatetimeIndex(wide.index.get_level_values(1))
    y = actual.reindex(ts).to_numpy(dtype="float64")
    return wide, names, iss, ts, y, bucket_of(ts - iss)


def learn_combination(frames: dict[str, pd.DataFrame], actual: pd.Series, fit_mask=None) -> dict[str, dict]:
    """Choose, per band, lead bucket and quantile, the option with the lowest pinball loss,
    kept only if it significantly beats naive (module docstring, :func:`_beats`).

    Parameters
    ----------
    frames: model name -> rolling forecasts of ONE series (forecast frame:
        ``series_id, tier, issued_at, timestamp, p50, p90, p95, p99``; GPUs or replicas).
    actual: the series' actuals indexed by timestamp (5-minute grid, same unit).
    fit_mask: callable ``(issued_at, timestamp) -> bool array`` selecting the
        fitting rows (default: all rows with an observed actual).

    Returns
    -------
    ``{band: {bucket_label: {q: {"choice", "weights", "pinball", "n"}}}}``.
    """
    spec = {}
    for band in BANDS:
        got = _band_inputs(frames, band, actual)
        if got is None:
            continue
        wide, names, iss, ts, y, bucket = got
        fit = np.isfinite(y) & (np.asarray(fit_mask(iss, ts), bool) if fit_mask else True)
        spec[band] = _learn_band(wide, names, band, y, bucket, fit)
    return spec


def apply_combination(frames: dict[str, pd.DataFrame], spec: dict[str, dict], series_id: str) -> pd.DataFrame:
    """Combined forecast frame (``tier = "combined"``) for every (origin, target)
    of a band that :func:`learn_combination` specified, where its candidates all
    have a forecast. A chosen model with no forecast in ``frames`` is dropped from
    its blend (weights renormalised), and a choice left empty falls back to naive."""
    parts = []
    for band, bspec in spec.items():
        used = {n for qs in bspec.values() for s in qs.values() for n in s["weights"]} | {DEFAULT}
        got = _band_inputs({n: f for n, f in frames.items() if n in used}, band,
                           pd.Series(dtype="float64", index=pd.DatetimeIndex([], tz="UTC")))
        if got is None:
            continue
        wide, names, _, _, _, bucket = got
        vals = np.full((len(wide), len(QCOLS)), np.nan)
        _apply_band(wide, bucket, _available(bspec, names), np.ones(len(wide), bool), vals)
        parts.append(_band_frame(wide, vals, np.isfinite(vals).all(axis=1)))
    return _finish(parts, series_id)


def _available(bspec: dict[str, dict], names: list[str]) -> dict[str, dict]:
    """``bspec`` with each choice restricted to the models in ``names`` (weights
    renormalised); a choice with none of them left falls back to naive, else the
    first model."""
    out = {}
    for label, qs in bspec.items():
        out[label] = {}
        for q, sp in qs.items():
            w = {n: v for n, v in sp["weights"].items() if n in names}
            if not w:
                w = {next((n for n in (DEFAULT, *names) if n in names)): 1.0}
            out[label][q] = {**sp, "weights": _normalised(w)}
    return out


def combine_online(frames: dict[str, pd.DataFrame], actual: pd.Series, series_id: str,
                   lookback: pd.Timedelta = LOOKBACK) -> tuple[pd.DataFrame, dict[str, int]]:
    """Rolling combination with no look-ahead (module docstring).

    Origins issued on UTC day ``D`` use the choice learned at the first of
    them, ``o1``, from rows with ``o1 - lookback < timestamp <= o1`` and an
    observed actual.
    Returns ``(combined frame, {band: number of daily choices})``.
    """
    parts, counts = [], {}
    for band in BANDS:
        got = _band_inputs(frames, band, actual)
        if got is None:
            continue
        wide, names, iss, ts, y, bucket = got
        vals = np.full((len(wide), len(QCOLS)), np.nan)
        day = iss.floor("1D")
        observed = np.isfinite(y)
        t8 = ts.as_unit("ns").asi8
        i8 = iss.as_unit("ns").asi8
        for d in day.unique():
            today = np.asarray(day == d)
            at = int(i8[today].min())  # the first origin of the day: what is known when it is issued
            fit = observed & (t8 <= at) & (t8 > at - lookback.value)
            spec = _learn_band(wide, names, band, y, bucket, fit)
            _apply_band(wide, bucket, spec, today, vals)
        counts[band] = len(day.unique())
        parts.append(_band_frame(wide, vals, np.isfinite(vals).all(axis=1)))
    return _finish(parts, series_id), counts


def _offsets(resid: np.ndarray, levels=QUANTILES) -> list[float]:
    """Conformal offsets, one per quantile level, from residuals ``(n, 4)`` = actual - forecast;
    0 for ``p50`` (module docstring). ``levels`` are the target levels (default the quantiles')."""
    n = len(resid)
    return [0.0 if q0 <= 0.5 else float(np.quantile(resid[:, j], min(1.0, max(0.0, math.ceil((n + 1) * q) / n)),
                                                    method="higher"))
            for j, (q0, q) in enumerate(zip(QUANTILES, levels))]


def learn_calibration(combined: pd.DataFrame, actual: pd.Series, fit_mask=None,
                      min_n: int = MIN_ROWS, levels: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Split-conformal offsets per lead bucket and quantile (module docstring).

    ``levels``: per bucket label, the target level of each quantile (e.g. the
    adaptive levels :func:`calibrate_online` ended with); default the nominal
    quantiles. Returns ``{bucket_label: [c_p50, c_p90, c_p95, c_p99]}`` (same
    unit as the forecast); buckets with fewer than ``min_n`` observed rows are
    left out.
    """
    out = {}
    if combined.empty:
        return out
    bucket = bucket_of(combined["timestamp"] - combined["issued_at"])
    y = actual.reindex(pd.DatetimeIndex(combined["timestamp"])).to_numpy(dtype="float64")
    mask = np.isfinite(y) & (np.asarray(fit_mask(combined["issued_at"], combined["timestamp"]), bool)
                             if fit_mask else True)
    resid = y[:, None] - combined[list(QCOLS)].to_numpy(dtype="float64")
    for b, (label, _, _, _) in enumerate(BUCKETS):
        m = mask & (bucket == b)
        if m.sum() >= min_n:
            out[label] = _offsets(resid[m], (levels or {}).get(label, QUANTILES))
    return out


def apply_calibration(combined: pd.DataFrame, offsets: dict[str, list[float]]) -> pd.DataFrame:
    """Add the offsets of each row's lead bucket; the caller sanitises (non-crossing, >= 0)."""
    if not offsets or combined.empty:
        return combined
    f = combined.copy()
    bucket = bucket_of(f["timestamp"] - f["issued_at"])
    vals = f[list(QCOLS)].to_numpy(dtype="float64", copy=True)
    for b, (label, _, _, _) in enumerate(BUCKETS):
        if label in offsets:
            vals[bucket == b] += np.asarray(offsets[label])
    f[list(QCOLS)] = vals
    return f


def calibrate_online(combined: pd.DataFrame, actual: pd.Series, window: pd.Timedelta = CAL_WINDOW,
                     min_n: int = MIN_ROWS, gamma: float = ACI_GAMMA,
                     levels_out: dict[str, list[float]] | None = None) -> pd.DataFrame:
    """Rolling split-conformal calibration with no look-ahead.

    For each origin ``o`` and lead bucket, the offsets come from the rows of
    that bucket whose target lies in ``(o - window, o]`` (their actuals were
    known when ``o`` was issued). Origins with fewer than ``min_n`` such rows
    keep their forecast uncalibrated. Returns a new frame; the caller sanitises it.

    The level of each offset adapts to the coverage actually reached
    (adaptive conformal inference, Gibbs & Candès 2021): at each origin, with
    ``err`` the share of the bucket's newly realised rows above their
    calibrated quantile, the miscoverage level moves by ``gamma * ((1 - q) -
    err)``, so a bucket that has been under-covering asks for a higher
    empirical quantile of the errors, and one over-covering for a lower one.
    ``gamma = 0.02`` per origin was chosen from {0.01, 0.02, 0.05} on the
    embedded sample's backtests (``gamma = 0`` is plain sliding-window
    split conformal). With ``levels_out`` (a dict), each bucket's levels after
    every realised row are stored there (``{bucket_label: [level per
    quantile]}``) for :func:`learn_calibration` to carry into the plan forecast.
    """
    if combined.empty:
        return combined
    f = combined.reset_index(drop=True)
    vals = f[list(QCOLS)].to_numpy(dtype="float64", copy=True)
    out = vals.copy()
    y = actual.reindex(pd.DatetimeIndex(f["timestamp"])).to_numpy(dtype="float64")
    bucket = bucket_of(f["timestamp"] - f["issued_at"])
    t8 = pd.DatetimeIndex(f["timestamp"]).as_unit("ns").asi8  # nanoseconds, like Timedelta.value
    i8 = pd.DatetimeIndex(f["issued_at"]).as_unit("ns").asi8
    resid_all = y[:, None] - vals
    for b in range(len(BUCKETS)):
        rows = np.flatnonzero(bucket == b)
        obs = rows[np.isfinite(y[rows])]
        if len(obs) < min_n:
            continue
        obs = obs[np.argsort(t8[obs], kind="stable")]
        ts, resid = t8[obs], resid_all[obs]
        miss = 1.0 - np.asarray(QUANTILES)  # adaptive miscoverage per level (Gibbs & Candes 2021)
        done = 0
        for o in np.unique(i8[rows]):
            hi = np.searchsorted(ts, o, side="right")
            lo = np.searchsorted(ts, o - window.value, side="right")
            if gamma and hi > done:
                new = obs[done:hi]  # realised since the last origin; their calibrated values are final
                err = (y[new, None] > out[new]).mean(axis=0)
                miss = miss + gamma * ((1.0 - np.asarray(QUANTILES)) - err)
                done = hi
            if hi - lo < min_n:
                continue
            target = rows[i8[rows] == o]
            out[target] += np.asarray(_offsets(resid[lo:hi], 1.0 - miss))
        if levels_out is not None:
            if gamma and done < len(obs):
                rest = obs[done:]
                miss = miss + gamma * ((1.0 - np.asarray(QUANTILES)) - (y[rest, None] > out[rest]).mean(axis=0))
            levels_out[BUCKETS[b][0]] = [float(v) for v in 1.0 - miss]
    res = f.copy()
    res[list(QCOLS)] = out
    return res
