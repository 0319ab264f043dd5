"""Re-score the combination from saved member forecasts, on the tuning or the evaluation window.

Why (settings are chosen on the tuning windows only)
    A full backtest spends minutes in the tiers, default Prophet and AutoETS,
    while a change to the combination (:mod:`forecasting.combining.weights`) or the
    calibration (:mod:`forecasting.combining.conformal`) only needs the members' rolling
    forecasts, which that change does not move. :func:`save_frames` keeps every
    model's rolling forecasts, the history and the windows of one backtest
    (``python -m benchmarks accuracy --save-frames DIR``); :func:`rescore` then
    re-combines and re-calibrates them with the code as it is now
    (:func:`forecasting.combining.assemble.combine_rolling`, the same call the plan makes)
    and scores every series on the window asked for, in seconds
    (``python -m benchmarks rescore``).

Windows (:class:`forecasting.backtest.Windows`)
    ``eval``: targets in ``[eval_start, end]``, origins from ``eval_start - 5 min``
    (:func:`forecasting.backtest.score`, as every README figure). ``tune``:
    targets in ``[tune_start, eval_start - 5 min]``, origins from
    ``tune_start - 5 min``: the week before, where settings may be chosen.
    The peers of the ``tune`` window are the models scored at every rolling
    origin (``naive``, ``seasonal_naive``, default ``prophet``) and the
    naive-conformal rule, recomputed at the tuning origins
    (:func:`forecasting.peers.naive_conformal`); AutoETS is issued at the
    evaluation origins only, so it is no peer there.

Limits
    The rolling origins start at ``tune_start``, so at any tuning origin the
    calibration holds at most 7 days of realised errors, and for the 7-day band
    far fewer: settings that differ only beyond 7 days of history (e.g. a 14-day
    against a 7-day calibration window) score the same on the tuning window and
    cannot be chosen there.

Files (``DIR``): ``rolling/<model>.parquet`` (forecast frames), ``history.parquet``
(the 5-minute history frame), ``windows.json`` (per series, the window bounds as
ISO timestamps and the split rule). Nothing is pickled.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from forecasting.backtest import BEST_OF, Windows, score
from forecasting.combining.assemble import ROLLING_MODELS, combine_rolling
from forecasting.metrics import seasonal_scale
from forecasting.peers import naive_conformal
from forecasting.types import STEP

WINDOWS = ("eval", "tune")
_FIELDS = ("start", "tune_start", "eval_start", "end")


def save_frames(folder: Path, rolling: dict[str, pd.DataFrame], h5: pd.DataFrame, windows: dict[str, Windows]) -> None:
    """Write every model's rolling forecast frame, the history frame and the windows under ``folder``
    (module docstring); an existing file of the same name is replaced."""
    folder = Path(folder)
    (folder / "rolling").mkdir(parents=True, exist_ok=True)
    for name, f in rolling.items():
        f.to_parquet(folder / "rolling" / f"{name}.parquet", index=False)
    h5.to_parquet(folder / "history.parquet", index=False)
    doc = {sid: {**{k: getattr(w, k).isoformat() for k in _FIELDS}, "rule": w.rule} for sid, w in windows.items()}
    (folder / "windows.json").write_text(json.dumps(doc, indent=1))


def load_frames(folder: Path) -> tuple[dict[str, pd.DataFrame], pd.DataFrame, dict[str, Windows]]:
    """``(rolling, history, windows)`` as :func:`save_frames` wrote them.

    Raises FileNotFoundError when ``folder`` lacks ``history.parquet`` or ``windows.json``.
    """
    folder = Path(folder)
    rolling = {p.stem: pd.read_parquet(p) for p in sorted((folder / "rolling").glob("*.parquet"))}
    h5 = pd.read_parquet(folder / "history.parquet")
    doc = json.loads((folder / "windows.json").read_text())
    windows = {sid: Windows(*(pd.Timestamp(w[k]) for k in _FIELDS), rule=w.get("rule", "")) for sid, w in doc.items()}
    return rolling, h5, windows


def window_bounds(w: Windows, which: str) -> tuple[pd.Timestamp, pd.Timestamp]:
    """Targets scored on window ``which`` (``eval`` or ``tune``, module docstring), inclusive.

    Raises ValueError for another name.
    """
    if which == "eval":
        return w.eval_start, w.end
    if which == "tune":
        return w.tune_start, w.eval_start - STEP
    raise ValueError(f"window {which!r}: expected one of {', '.join(WINDOWS)}")


def rescore(rolling: dict[str, pd.DataFrame], h5: pd.DataFrame, windows: dict[str, Windows], which: str = "eval",
            series: list[str] | None = None) -> dict[str, dict[str, dict]]:
    """Per series, ``{model: {band: scores}}`` (:func:`forecasting.backtest.score`) on window
    ``which`` for ``combined`` (re-combined and re-calibrated from the members in ``rolling``,
    module docstring) and the peers of that window; feed it to
    :func:`forecasting.backtest.summarise`. ``series``: only these ids (default all of
    ``windows``). MASE is scaled by the seasonal-naive in-sample MAE of the training part.
    """
    out = {}
    for sid, w in windows.items():
        if series and sid not in series:
            continue
        g = h5[h5["series_id"] == sid]
        actual = pd.Series(g["value"].to_numpy(), index=pd.DatetimeIndex(g["timestamp"]))
        per = {n: rolling[n][rolling[n]["series_id"] == sid] for n in ROLLING_MODELS if n in rolling}
        models = {"combined": combine_rolling(per, actual, sid, h5)[0]}
        models.update({m: rolling[m][rolling[m]["series_id"] == sid] for m in BEST_OF if m in rolling})
        lo, hi = window_bounds(w, which)
        if which == "tune":
            models.pop("autoets", None)  # issued at the evaluation origins only
            iss = pd.DatetimeIndex(per["naive"]["issued_at"].unique()) if "naive" in per else pd.DatetimeIndex([])
            models["naive_conformal"] = naive_conformal(actual, sorted(iss[(iss >= lo - STEP) & (iss < hi)]), sid)
        elif "naive_conformal" in rolling:
            models["naive_conformal"] = rolling["naive_conformal"][rolling["naive_conformal"]["series_id"] == sid]
        scale = seasonal_scale(actual[actual.index < w.tune_start].to_numpy(), 288)
        out[sid] = {m: s for m, s in ((m, score(actual, f, scale, (lo, hi))) for m, f in models.items()) if s}
    return out
