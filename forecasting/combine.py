"""Combine the tiers per lead band, then calibrate the quantiles conformally.

Combination (per series and lead band ``1h``, ``24h``, ``7d``)
    Candidates are every model that forecasts into the band (the tiers plus
    ``naive`` and ``seasonal_naive``: GPU demand is step-shaped, and persistence
    is hard to beat at short leads). On the *fitting* rows (the tuning window
    in backtests) each option is scored by mean pinball loss:

    * each candidate alone;
    * the inverse-pinball-weighted blend of all candidates;
    * the equal blend of the best two.

    The lowest wins. Quantiles are blended level by level (Vincentisation,
    Genest 1992; Lichtendahl et al. 2013 "Is it better to average probabilities
    or quantiles?").

Calibration (per series and band)
    One-sided split-conformal offsets (Romano, Patterson & Candès 2019,
    "Conformalized Quantile Regression"): for each level ``q`` the offset is
    the ``ceil((n + 1) q) / n`` empirical quantile of ``actual - forecast_q``
    over a calibration set, added to ``forecast_q``. In rolling evaluation the
    calibration set of an origin is the band's forecasts whose targets were
    already observed at that origin, within a trailing window
    (:func:`calibrate_online`; sliding-window conformal in the spirit of
    Gibbs & Candès 2021, "Adaptive Conformal Inference Under Distribution
    Shift"), so no origin sees its own or any later actual. The plan forecast
    uses every realised error of the trailing window (:func:`learn_calibration`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from forecasting.metrics import pinball
from forecasting.types import FORECAST_COLUMNS, QCOLS, QUANTILES

BANDS: dict[str, tuple[pd.Timedelta, pd.Timedelta]] = {
    "1h": (pd.Timedelta(0), pd.Timedelta("1h")),
    "24h": (pd.Timedelta("1h"), pd.Timedelta("24h")),
    "7d": (pd.Timedelta("24h"), pd.Timedelta("7D")),
}


def band_of(lead: pd.Series | pd.TimedeltaIndex) -> np.ndarray:
    """Band name per lead (``timestamp - issued_at``); '' outside every band."""
    lead = pd.to_timedelta(np.asarray(lead))
    out = np.full(len(lead), "", dtype=object)
    for name, (lo, hi) in BANDS.items():
        out[(lead > lo) & (lead <= hi)] = name
    return out


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
    wide = pd.concat(parts, axis=1, join="inner")
    return wide, names


def _blend(wide: pd.DataFrame, weights: dict[str, float]) -> np.ndarray:
    tot = sum(weights.values())
    out = np.zeros((len(wide), len(QCOLS)))
    for name, w in weights.items():
        out += (w / tot) * wide[[f"{name}:{q}" for q in QCOLS]].to_numpy()
    return out


def learn_combination(frames: dict[str, pd.DataFrame], actual: pd.Series,
                      fit_mask=None) -> dict[str, dict]:
    """Choose, per band, the option with the lowest mean pinball loss on the fitting rows.

    Parameters
    ----------
    frames: model name -> rolling forecasts of ONE series (forecast frame).
    actual: the series' actuals indexed by timestamp (5-minute grid).
    fit_mask: callable ``(issued_at, timestamp) -> bool array`` selecting the
        fitting rows (default: all rows).

    Returns
    -------
    ``{band: {"weights": {model: weight}, "pinball": float, "options": {label: pinball}}}``.
    """
    spec = {}
    for band in BANDS:
        wide, names = _aligned(frames, band)
        if wide.empty:
            continue
        idx = wide.index
        mask = fit_mask(idx.get_level_values(0), idx.get_level_values(1)) if fit_mask else np.ones(len(wide), bool)
        y = actual.reindex(idx.get_level_values(1)).to_numpy()
        ok = np.asarray(mask) & np.isfinite(y)
        if ok.sum() < 12:
            # too little to choose on: fall back to the band's owning tier, else the first candidate
            owner = {"1h": "hourly", "24h": "daily", "7d": "weekly"}[band]
            spec[band] = {"weights": {owner if owner in names else names[0]: 1.0}, "pinball": float("nan"),
                          "options": {}}
            continue
        w_ok = wide[ok]
        y_ok = y[ok]
        losses = {n: pinball(y_ok, w_ok[[f"{n}:{q}" for q in QCOLS]].to_numpy()) for n in names}
        options = {n: ({n: 1.0}, losses[n]) for n in names}
        inv = {n: 1.0 / max(losses[n], 1e-9) for n in names}
        options["inverse_pinball_blend"] = (inv, pinball(y_ok, _blend(w_ok, inv)))
        if len(names) >= 2:
            top2 = sorted(names, key=lambda n: losses[n])[:2]
            eq = {n: 1.0 for n in top2}
            options["best_two_blend"] = (eq, pinball(y_ok, _blend(w_ok, eq)))
        label, (weights, loss) = min(options.items(), key=lambda kv: kv[1][1])
        spec[band] = {"choice": label, "weights": weights, "pinball": loss,
                      "options": {k: v[1] for k, v in options.items()}}
    return spec


def apply_combination(frames: dict[str, pd.DataFrame], spec: dict[str, dict], series_id: str) -> pd.DataFrame:
    """Combined forecast frame (``tier = "combined"``) for every (origin, target)
    where the chosen models of the target's band all have a forecast."""
    out = []
    for band, sp in spec.items():
        sub = {n: frames[n] for n in sp["weights"] if n in frames}
        wide, names = _aligned(sub, band)
        if wide.empty:
            continue
        q = _blend(wide, {n: sp["weights"][n] for n in names})
        f = pd.DataFrame(q, columns=list(QCOLS))
        f.insert(0, "timestamp", wide.index.get_level_values(1))
        f.insert(0, "issued_at", wide.index.get_level_values(0))
        out.append(f)
    if not out:
        return pd.DataFrame(columns=FORECAST_COLUMNS)
    res = pd.concat(out, ignore_index=True).sort_values(["issued_at", "timestamp"], ignore_index=True)
    res.insert(0, "tier", "combined")
    res.insert(0, "series_id", series_id)
    return res[FORECAST_COLUMNS]


def learn_calibration(combined: pd.DataFrame, actual: pd.Series, fit_mask=None) -> dict[str, list[float]]:
    """Split-conformal offsets per band and quantile (module docstring); ``{band: [c_p50, c_p90, c_p95, c_p99]}``."""
    out = {}
    bands = band_of(combined["timestamp"] - combined["issued_at"])
    y_all = actual.reindex(pd.DatetimeIndex(combined["timestamp"])).to_numpy()
    mask_all = fit_mask(combined["issued_at"], combined["timestamp"]) if fit_mask else np.ones(len(combined), bool)
    for band in BANDS:
        m = (bands == band) & np.asarray(mask_all) & np.isfinite(y_all)
        n = int(m.sum())
        if n < 12:
            continue
        y = y_all[m]
        offs = []
        for qname, q in zip(QCOLS, QUANTILES):
            r = y - combined.loc[m, qname].to_numpy()
            level = min(1.0, math.ceil((n + 1) * q) / n)
            offs.append(float(np.quantile(r, level, method="higher")))
        out[band] = offs
    return out


def apply_calibration(combined: pd.DataFrame, offsets: dict[str, list[float]]) -> pd.DataFrame:
    """Add the offsets of each row's band; the caller sanitises (non-crossing, >= 0)."""
    if not offsets or combined.empty:
        return combined
    f = combined.copy()
    bands = band_of(f["timestamp"] - f["issued_at"])
    for band, offs in offsets.items():
        m = bands == band
        for qname, c in zip(QCOLS, offs):
            f.loc[m, qname] = f.loc[m, qname] + c
    return f


def calibrate_online(combined: pd.DataFrame, actual: pd.Series, window: pd.Timedelta = pd.Timedelta("7D"),
                     min_n: int = 24) -> pd.DataFrame:
    """Rolling split-conformal calibration with no look-ahead.

    For each origin ``o`` and band, the offsets come from the rows of that band
    whose target is at or before ``o`` and after ``o - window`` (their actuals
    were known when ``o`` was issued). Origins with fewer than ``min_n`` such
    rows are left uncalibrated. Offsets of the upper quantiles (p90, p95, p99)
    only widen: the realised errors of a band are biased towards its shortest
    leads (the long-lead targets are not observed yet), so narrowing would
    under-cover the long leads. Returns a new frame; the caller sanitises it.
    """
    if combined.empty:
        return combined
    f = combined.reset_index(drop=True).copy()
    bands = band_of(f["timestamp"] - f["issued_at"])
    y = actual.reindex(pd.DatetimeIndex(f["timestamp"])).to_numpy()
    origins = np.unique(pd.DatetimeIndex(f["issued_at"]).asi8)
    for band in BANDS:
        m = np.flatnonzero((bands == band) & np.isfinite(y))
        rows_all = np.flatnonzero(bands == band)
        if len(m) < min_n or len(rows_all) == 0:
            continue
        ts = pd.DatetimeIndex(f["timestamp"]).asi8[m]
        order = np.argsort(ts, kind="stable")
        m, ts = m[order], ts[order]
        resid = {qn: y[m] - f[qn].to_numpy()[m] for qn in QCOLS}
        issued_rows = pd.DatetimeIndex(f["issued_at"]).asi8[rows_all]
        for o in origins:
            hi = np.searchsorted(ts, o, side="right")
            lo = np.searchsorted(ts, o - window.value, side="right")
            n = hi - lo
            if n < min_n:
                continue
            target_rows = rows_all[issued_rows == o]
            if len(target_rows) == 0:
                continue
            for qn, q in zip(QCOLS, QUANTILES):
                level = min(1.0, math.ceil((n + 1) * q) / n)
                c = float(np.quantile(resid[qn][lo:hi], level, method="higher"))
                if q > 0.5:
                    c = max(c, 0.0)
                f.loc[target_rows, qn] = f.loc[target_rows, qn].to_numpy() + c
    return f

