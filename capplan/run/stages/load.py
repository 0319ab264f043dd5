"""The load stage: a source (:mod:`capplan.sources`) -> regularised history and windows.

:func:`load` reads the source (:func:`select_series`), regularises it to the 5-minute grid
(:mod:`forecasting.regularise`), aggregates it to hours and splits each series into training |
tuning | evaluation windows (:func:`forecasting.backtest.split_windows`) (:func:`prepare`).
It writes the regularisation's notes, the source's notes and its spike warnings
(:mod:`capplan.sources.implausible`) to the ledger, and the series it cannot use as failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.errors import InputError
from capplan.run.executor import Failed
from capplan.run.stages.fleet import checked_members
from capplan.run.state import Ledger, PlanState, Prepared
from capplan.sources import LoadedHistory, load_source
from capplan.store.remote import check_store_url
from forecasting import backtest as bt
from forecasting.regularise import regularise, to_hourly
from forecasting.types import STEP, SeriesMeta
from optimizer.engine.inputs import native_grid
from optimizer.search.multiweek import evidence_windows


def store_option(store: str) -> str:
    """The ``--store`` option's value as a store root: an object-store URL (``s3://``, ``gs://``,
    ``file://``; :mod:`capplan.store.remote`) as given, a folder as its absolute path (relative to the
    working folder, unlike a config's ``store:``, which is relative to the config file).

    Raises :class:`capplan.errors.InputError` when the folder exists as a file, or the URL breaks the
    store URL rule (:func:`capplan.store.remote.check_store_url`: no credentials, no ``memory://``)."""
    if "://" in store:
        return check_store_url(store, "--store")
    p = Path(store).expanduser().resolve()
    if p.exists() and not p.is_dir():
        raise InputError(f"--store {store}: is a file; point it at a folder (it is created when missing)")
    return str(p)


def store_location(cfg: CapplanConfig, config: Path | None = None, cwd: Path | None = None) -> list[str]:
    """Lines saying which store (history, runs, the cache) and model folder a run uses, and,
    when ``config`` left one at its default (``.capplan/store``, ``models``), that it lies
    next to the config file rather than in the working folder ``cwd`` (so the working
    folder's cache and runs are not the ones used)."""
    lines = [f"store: {cfg.store}; models: {cfg.models}"]
    if config is None:
        return lines
    here = (cwd or Path.cwd()).resolve()
    beside = Path(config).resolve().parent
    if beside == here:
        return lines
    for attr, default in (("store", ".capplan/store"), ("models", "models")):
        if "://" not in getattr(cfg, attr) and Path(getattr(cfg, attr)) == beside / default:
            lines.append(f"{attr}: {config} does not set `{attr}:`, so the default folder {default} is taken next "
                         "to it "
                         f"({beside / default}), not in the working folder ({here / default}); set {attr}: in the "
                         "config to share one")
    return lines


def load(state: PlanState) -> None:
    """Set ``state.loaded`` and ``state.prep``; the ledger gets each series' notes (the
    regularisation's, then the source's) and the source's spike warnings."""
    state.progress("load", f"reading {state.source}")
    state.loaded = select_series(state.source, state.cfg, state.series, state.timezone)
    loaded = state.loaded
    state.progress("regularise", f"{loaded.frame['series_id'].nunique()} series, {len(loaded.frame)} rows")
    state.prep = prepare(loaded, state.cfg, state.ledger, progress=lambda line: state.progress("regularise", line))
    checked_members(state)  # a bad fleet member fails here, before any forecast
    for sid in state.prep.windows:
        for n in loaded.notes_for(sid, state.prep.windows):
            state.ledger.note(sid, n)
        if sid in loaded.warnings:  # the data's own warnings first (suspect spikes)
            state.ledger.warn(sid, loaded.warnings[sid])


def select_series(source: str, cfg: CapplanConfig, series: list[str] | None = None,
                  timezone: str = "UTC") -> LoadedHistory:
    """Load a source and keep the requested series; the others stay in ``context``, which
    the cluster-wide outage rule and the global models read (:func:`prepare`), so a
    series' data and forecasts do not depend on the selection.

    Raises InputError for an unknown ``--series`` id, or a fleet member the config names (``fleet.series``, a
    ``series:`` entry with fleet keys) that the source does not hold (listing the known ones).
    """
    loaded = load_source(source, timezone=timezone, config=cfg)
    known = sorted(loaded.frame["series_id"].unique())
    fleet_ids = list(cfg.fleet.series) if cfg.fleet is not None else []
    fleet_ids += [s.id for s in cfg.series if s.fleet_keys().is_set()]
    absent = [s for s in dict.fromkeys(fleet_ids) if s not in set(known)]
    if absent:  # a misspelt id would otherwise leave the fleet without that member, silently
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        raise InputError(f"fleet: series {', '.join(absent)} (fleet.series or a series: entry with fleet keys) not in "
                         f"{loaded.label or source}; known: {shown}")
    if series:
        unknown = [s for s in series if s not in known]
        if unknown:
            shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
            raise InputError(f"--series {', '.join(unknown)}: not in {loaded.label or source}; known: {shown}")
        keep = loaded.frame["series_id"].isin(series)
        loaded.context = loaded.frame[~keep].reset_index(drop=True)  # for the cluster-wide outage rule only
        loaded.frame = loaded.frame[keep].reset_index(drop=True)
    if loaded.frame.empty:
        raise InputError(f"{loaded.label or source}: no data")
    for sid in loaded.frame["series_id"].unique():
        loaded.meta.setdefault(sid, SeriesMeta())
    return loaded


PROGRESS_EVERY = 2000
"""Series between two progress lines of :func:`prepare`'s window split."""


def _median_spacings(frame: pd.DataFrame) -> pd.Series:
    """Per series with at least 3 distinct timestamps, the median spacing of its distinct
    ``timestamp`` values (Timedelta; as :func:`optimizer.engine.inputs.median_spacing`), sorted by
    series id; computed for all series at once."""
    f = frame[["series_id", "timestamp"]].drop_duplicates().sort_values(["series_id", "timestamp"])
    gaps = f["timestamp"].diff()
    gaps[f["series_id"].ne(f["series_id"].shift())] = pd.NaT
    n = f.groupby("series_id").size()
    med = gaps.groupby(f["series_id"]).median()
    return med[(n >= 3) & med.notna()].sort_index()


def prepare(loaded: LoadedHistory, cfg: CapplanConfig, ledger: Ledger,
            progress: Callable[[str], None] | None = None) -> Prepared:
    """Regularise to 5 minutes, aggregate to hours, split windows per series; each series'
    regularisation notes go to ``ledger``. A series with no observed value at all, or too
    short to split into windows, is failed in ``ledger`` (stage ``regularise``) and left out.

    When ``--series`` chose some of the source's series (``loaded.context`` holds the others),
    every series is regularised together, so the cluster-wide outage rule sees the same
    cluster, and the usable ones become :attr:`Prepared.fleet`, on which the global models
    train: a series' data and forecasts do not depend on the selection. A context series
    that cannot be used (too short, nothing observed) is left out of the fleet.

    Raises InputError when no chosen series has an observed value, every chosen series is
    too short to split, or one is sampled at 10 minutes or more (its median spacing, as
    :func:`optimizer.engine.inputs.median_spacing`: every other 5-minute point would be a gap;
    jittered 5-minute samples pass).

    Time grows linearly with the number of series and rows (no per-series scan of the whole
    frame); ``progress`` is told a line per phase and every :data:`PROGRESS_EVERY` series split."""
    told = progress or (lambda line: None)
    ctx = loaded.context if loaded.context is not None and len(loaded.context) else None
    frame = loaded.frame if ctx is None else pd.concat([loaded.frame, ctx], ignore_index=True)
    chosen = set(loaded.frame["series_id"].unique())
    spacing = _median_spacings(loaded.frame)
    for sid, step in spacing.items():
        if step >= 2 * STEP:  # every other grid point empty: not jitter
            raise InputError(f"series {sid}: sampled every {step.total_seconds():g} s (median spacing); capplan "
                             "forecasts and replays "
                             f"on a {STEP.total_seconds() / 60:g}-minute grid, so coarser data would read as gaps: "
                             f"give samples every 5 minutes or finer (e.g. a Prometheus pull with step 5m)")
    h5, rep = regularise(frame, progress=told)
    told(f"hourly aggregates of {len(h5)} points")
    h1 = to_hourly(h5)
    raw = loaded.frame.groupby("series_id")["timestamp"].agg(["size", "min", "max"])
    windows, notes, short = {}, {}, {}
    codes, ids = pd.factorize(h5["series_id"], sort=False)  # h5 is sorted by series: contiguous blocks
    bounds = np.flatnonzero(np.diff(codes)) + 1
    starts, ends = np.concatenate([[0], bounds]), np.concatenate([bounds, [len(codes)]])
    stamps = pd.DatetimeIndex(h5["timestamp"])
    for i, (sid, a, b) in enumerate(zip(ids, starts, ends), 1):
        if i % PROGRESS_EVERY == 0:
            told(f"windows: {i}/{len(ids)} series")
        notes[sid] = rep.notes(sid)
        idx = stamps[a:b]
        try:
            w = bt.split_windows(idx, cfg.plan.tune_days, cfg.plan.eval_days)
        except ValueError:  # too short (forecasting.backtest.MIN_POINTS)
            if sid in chosen:  # left out like a series with no observed value (a context one: not in the fleet)
                n, t0, t1 = raw.loc[sid, "size"], raw.loc[sid, "min"], raw.loc[sid, "max"]
                short[sid] = Failed(f"InputError: series {sid}: {n} row(s) in {loaded.label or 'the source'} "
                                    f"from {t0.isoformat()} to {t1.isoformat()} make {len(idx)} point(s) on the "
                                    f"5-minute grid, too short: planning needs at least {bt.MIN_POINTS} (one hour, "
                                    "the hourly tier's horizon); give it a longer history")
            continue
        if w.rule != "days":
            notes[sid].append(f"windows: {w.rule}; tuning and evaluation use thirds of the history")
        elif not cfg.plan.quick:  # the tuning window holds the complete weeks of evidence (optimizer.search.multiweek);
            w = evidence_windows(w, cfg.plan.evidence_weeks)  # a quick run keeps its short one (capplan.config.quick)
        windows[sid] = w
    inference = [sid for sid in windows if sid in chosen and loaded.meta.get(sid, SeriesMeta()).kind == "inference"]
    rows = loaded.frame[loaded.frame["series_id"].isin(inference)].groupby("series_id") if inference else {}
    native = {sid: native_grid(g) for sid, g in rows}
    meta = {sid: loaded.meta.get(sid, SeriesMeta()) for sid in windows}
    everything = Prepared(h5, h1, meta, windows, rep, {k: v for k, v in native.items() if v is not None})
    observed = h5.groupby("series_id")["value"].count()
    prep = everything if ctx is None else everything.select([s for s in windows if s in chosen])
    if ctx is not None:
        prep.fleet = everything.select([s for s in windows if observed.get(s, 0) > 0])
    for sid in prep.windows:
        for n in notes[sid]:
            ledger.note(sid, n)
    empty = {sid: Failed(f"InputError: series {sid}: every value is missing (no observed demand); check its "
                         "query or file") for sid in prep.windows if observed.get(sid, 0) == 0}
    if short and not prep.windows:
        raise InputError("; ".join(f.error.removeprefix("InputError: ") for f in short.values()))
    if empty and len(empty) == len(prep.windows):
        raise InputError(f"{loaded.label or 'source'}: every value of every series is missing (no observed demand)")
    for sid, f in {**short, **empty}.items():
        ledger.fail(sid, "regularise", f.error, f.where)
    return prep.drop(list(short) + list(empty)) if empty or short else prep
