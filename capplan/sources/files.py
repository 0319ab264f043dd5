"""``csv:PATH`` and ``parquet:PATH`` sources: a long table of demand.

Columns: ``timestamp``, ``series_id``, ``value`` (required) and optional
``kind`` (training|inference), ``unit`` (gpu|replica), ``gpu_model``, named in any case, and the fleet keys
(:mod:`capplan.config.fleet`): ``gpu_models`` (GPU models separated by ``|``), ``min_gpu_memory_gb``, ``share``
(a number 0 < share <= 1 or a MIG profile such as ``1g.10gb``), one value per series; they are checked against
the built-in GPU catalogue here (a config's ``gpu_catalogue:`` is applied later, by the fleet stage).

* ``timestamp`` is ISO 8601 with or without an offset, or Unix epoch seconds.
  Naive timestamps are read in ``--timezone`` (default UTC); everything is
  converted to UTC. Numbers of 12 or 13 digits (``>= 1e11``, which as seconds
  would lie after the year 5000) are read as epoch **milliseconds**, row by
  row, and a note says how many; larger numbers (micro/nanoseconds) are an error.
* One series may span at most :data:`MAX_SPAN_DAYS` days: a row dated far away
  from the rest (``2200-01-01`` in a 2024 file) is an error naming that row,
  found before anything is resampled.
* ``value`` must be numeric; empty cells and the words of :data:`MISSING_WORDS` (``NaN``,
  ``NA``, ``N/A``, ``null``, ``None``; any case) are missing values (NaN). Non-finite
  and implausibly large values become missing with a note
  (:mod:`capplan.sources.implausible`).

Every problem raises :class:`capplan.errors.InputError` naming the file and
the column or the first bad row (1-based, counting the header as row 1).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from capplan.config.fleet import SeriesFleetKeys, catalogue_from, check_series_keys
from capplan.errors import InputError, looks_like_name
from capplan.sources.history import LoadedHistory
from forecasting.types import SeriesMeta

REQUIRED = ("timestamp", "series_id", "value")
FLEET_COLUMNS = ("gpu_models", "min_gpu_memory_gb", "share")
COLUMNS = (*REQUIRED, "kind", "unit", "gpu_model", *FLEET_COLUMNS)
"""Every column capplan reads; a header names them in any case (``Timestamp``)."""
MISSING_WORDS = ("nan", "na", "n/a", "null", "none")
"""``value`` cells (lower-cased) read as missing, as pandas' and R's exports write them."""
MS_FROM = 1e11
"""Epoch numbers at or above this are milliseconds (as seconds: after the year 5000)."""
MS_UNTIL = 1e14
"""... and below this (as milliseconds: before the year 5138); larger is an error."""
MAX_SPAN_DAYS = 1096
"""Longest history one series may span (3 years: 315,648 points on the 5-minute grid)."""


def _read(kind: str, arg: str) -> tuple[Path, pd.DataFrame]:
    if not arg:
        raise InputError(f"--source {kind}:PATH: a path is required, e.g. {kind}:demand.{kind}")
    p = Path(arg).expanduser()
    if p.is_dir():
        raise InputError(f"{p}: is a folder; name a {kind} file")
    if not p.is_file():
        raise InputError(f"{p}: file not found")
    if p.stat().st_size == 0:
        raise InputError(f"{p}: the file is empty; expected a header {','.join(REQUIRED)}")
    try:
        if kind == "csv":
            df = pd.read_csv(p, dtype=str, keep_default_na=False, na_values=[""])
        else:
            df = pd.read_parquet(p)
    except pd.errors.EmptyDataError:
        raise InputError(f"{p}: the file is empty; expected a header {','.join(REQUIRED)}") from None
    except Exception as exc:  # unreadable file: name it, say what was expected
        raise InputError(f"{p}: cannot read as {kind}: {exc}") from None
    names = [str(c).strip() for c in df.columns]
    # a known column in another case (``Timestamp``, ``VALUE``) is that column, unless the file also has it
    df.columns = [n.lower() if n.lower() in COLUMNS and n.lower() not in names else n for n in names]
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        shown = [c for c in df.columns if looks_like_name(c)]
        hidden = len(df.columns) - len(shown)
        found = ", ".join(shown + ([f"{hidden} not shown (not column names: is this a data file?)"] if hidden else []))
        raise InputError(f"{p}: missing column(s) {', '.join(missing)}; found {found or 'none'}")
    if df.empty:
        raise InputError(f"{p}: no data rows after the header")
    return p, df


def _epoch(numeric: pd.Series, col: pd.Series, path: Path, notes: list[str] | None) -> pd.Series:
    """Epoch seconds, or milliseconds where ``MS_FROM <= |x| < MS_UNTIL`` -> UTC times."""
    x = numeric.astype("float64")
    too_big = ~np.isfinite(x) | (x.abs() >= MS_UNTIL)
    if too_big.any():
        i = int(np.flatnonzero(too_big.reindex(col.index, fill_value=False).to_numpy())[0])
        raise InputError(f"{path}: row {i + 2}: column timestamp: {col.iloc[i]!r} is not a plausible epoch time "
                         "(microseconds or nanoseconds?); use epoch seconds, epoch milliseconds or ISO 8601")
    ms = x.abs() >= MS_FROM
    if ms.any() and notes is not None:
        notes.append(f"{path}: {int(ms.sum())} timestamp(s) of 12+ digits read as epoch milliseconds")
    return pd.to_datetime(x.where(~ms, x / 1000.0), unit="s", utc=True)


def _localize(naive: pd.Series, timezone: str, path: Path) -> pd.Series:
    """Naive local times (NaT where they did not parse) in ``timezone``.

    Raises InputError naming the first row whose local time does not exist (the hour a
    daylight-saving change skips) or happens twice (the hour it repeats) in ``timezone``:
    such a time cannot be placed on the UTC axis without guessing."""
    local = naive.dt.tz_localize(timezone, ambiguous="NaT", nonexistent="NaT")
    lost = local.isna() & naive.notna()
    if lost.any():
        i = int(np.flatnonzero(lost.to_numpy())[0])
        t = naive.iloc[i]
        gap = pd.isna(naive.iloc[[i]].dt.tz_localize(timezone, ambiguous="NaT", nonexistent="shift_forward").iloc[0])
        why = "happens twice" if gap else "does not exist"
        raise InputError(f"{path}: row {naive.index[i] + 2}: column timestamp: {t} {why} in --timezone {timezone} "
                         "(a daylight-saving change); write timestamps in UTC or with an offset "
                         "(e.g. 2024-11-03T01:30:00-04:00)")
    return local


def _in_range(parsed: pd.Series, col: pd.Series, path: Path) -> pd.Series:
    """``parsed`` (datetimes of any unit, indexed as ``col``) when every one lies within the range a
    nanosecond timestamp holds (``pd.Timestamp.min`` to ``max``: 1677-09-21 to 2262-04-11), as the
    history contract's ``datetime64[ns, UTC]`` needs. Raises InputError naming the first row outside."""
    lo, hi = pd.Timestamp.min, pd.Timestamp.max
    if getattr(parsed.dt, "tz", None) is not None:
        lo, hi = lo.tz_localize("UTC"), hi.tz_localize("UTC")
    far = parsed.notna() & ((parsed < lo) | (parsed > hi))
    if far.any():
        i = int(col.index.get_loc(far.index[np.flatnonzero(far.to_numpy())[0]]))
        raise InputError(f"{path}: row {i + 2}: column timestamp: {col.iloc[i]!r} lies outside "
                         f"{lo.date()} to {hi.date()}, the range capplan's timestamps hold; fix or remove the row")
    return parsed


def parse_timestamps(col: pd.Series, path: Path, timezone: str, notes: list[str] | None = None) -> pd.Series:
    """ISO 8601 (with or without offset), epoch seconds or epoch milliseconds
    (numbers >= ``MS_FROM``) -> ``datetime64[ns, UTC]``. ``notes`` (if given)
    receives a note when milliseconds were read.

    Raises InputError naming the first row that does not parse, or a number
    too large for epoch milliseconds.
    """
    if pd.api.types.is_datetime64_any_dtype(col):
        ts = _in_range(pd.to_datetime(col), col, path)
        if ts.dt.tz is None:
            ts = _localize(ts, timezone, path)
        return ts.dt.tz_convert("UTC").astype("datetime64[ns, UTC]")
    s = col.astype(str).str.strip()
    numeric = pd.to_numeric(s, errors="coerce")
    if numeric.notna().all():
        return _epoch(numeric, col, path, notes).astype("datetime64[ns, UTC]")
    has_offset = s.str.contains(r"(?:Z|[+-]\d{2}:?\d{2})$", regex=True)
    out = pd.Series(pd.NaT, index=s.index, dtype="datetime64[ns, UTC]")
    if has_offset.any():
        out[has_offset] = _in_range(pd.to_datetime(s[has_offset], utc=True, errors="coerce", format="ISO8601"),
                                    col, path)
    naive = ~has_offset & numeric.isna()
    if naive.any():
        parsed = _in_range(pd.to_datetime(s[naive], errors="coerce", format="ISO8601"), col, path)
        out[naive] = _localize(parsed, timezone, path).dt.tz_convert("UTC")
    epoch = numeric.notna() & ~has_offset
    if epoch.any():
        out[epoch] = _epoch(numeric[epoch], col, path, notes)
    bad = out.isna()
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{path}: row {i + 2}: column timestamp: cannot parse {col.iloc[i]!r} "
                         "(use ISO 8601, e.g. 2024-05-01T12:00:00Z, or Unix epoch seconds)")
    return out


def check_span(sid: pd.Series, ts: pd.Series, path: Path) -> None:
    """Raise InputError naming the row of a series whose times span more than
    ``MAX_SPAN_DAYS``: the row farthest from the series' median time (an
    outlying date such as 2200-01-01), before anything is resampled."""
    limit = pd.Timedelta(days=MAX_SPAN_DAYS)
    g = ts.groupby(sid)
    span = g.max() - g.min()
    for s_id in span.index[span > limit]:
        t = ts[sid == s_id]
        med = t.sort_values().iloc[len(t) // 2]
        far = (t - med).abs().idxmax()
        i = int(ts.index.get_loc(far))
        raise InputError(f"{path}: row {i + 2}: column timestamp: {t[far].isoformat()} is {abs(t[far] - med).days} "
                         f"days from the middle of series {s_id} ({med.date()}); one series may span at most "
                         f"{MAX_SPAN_DAYS} days: fix or remove the row")


def _finish(p: Path, df: pd.DataFrame, timezone: str) -> LoadedHistory:
    notes: list[str] = []
    ts = parse_timestamps(df["timestamp"], p, timezone, notes)
    raw = df["value"]
    vals = pd.to_numeric(raw, errors="coerce")
    bad = vals.isna() & raw.notna() & ~raw.astype(str).str.strip().str.lower().isin(MISSING_WORDS)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"{p}: row {i + 2}: column value: {raw.iloc[i]!r} is not a number")
    sid = df["series_id"].astype(str).str.strip()
    if (sid == "").any() or df["series_id"].isna().any():
        i = int(np.flatnonzero(((sid == "") | df["series_id"].isna()).to_numpy())[0])
        raise InputError(f"{p}: row {i + 2}: column series_id is empty")
    ctrl = sid.map(lambda x: not x.isprintable())
    if ctrl.any():  # escape sequences and line breaks cannot be label values, file names or manifest names
        i = int(np.flatnonzero(ctrl.to_numpy())[0])
        raise InputError(f"{p}: row {i + 2}: column series_id: {sid.iloc[i]!r} holds control characters; "
                         "use printable ids")
    check_span(sid, ts, p)
    frame = pd.DataFrame({"series_id": sid, "timestamp": ts, "value": vals.astype("float64")})
    n_nan = frame["value"].isna().groupby(frame["series_id"], sort=True).sum()
    for s_id, k in n_nan[n_nan > 0].items():  # "<id>: ..." so that the note reaches that series only
        notes.append(f"{s_id}: {p}: {int(k)} missing values read as NaN (treated as gaps)")
    meta = {}
    for s_id, g in df.assign(series_id=sid).groupby("series_id", sort=True):
        kw = {}
        for col in ("kind", "unit", "gpu_model", *FLEET_COLUMNS):
            if col in g.columns and g[col].notna().any():
                vals = g[col].dropna().astype(str).str.strip().unique()
                if len(vals) > 1:
                    raise InputError(f"{p}: series {s_id}: column {col} has several values ({', '.join(vals[:3])}); "
                                     "a series has one")
                kw[col] = vals[0]
        if "kind" in kw and "unit" not in kw:
            kw["unit"] = "gpu" if kw["kind"] == "training" else "replica"
        if "kind" not in kw:
            notes.append(f"{s_id}: no kind column; assumed training (unit gpu)")
        if kw.get("kind", "training") == "training" and kw.get("unit", "gpu") != "gpu":
            raise InputError(f"{p}: series {s_id}: column unit: {kw['unit']!r} for a training pool; training "
                             "demand is counted in GPUs (unit gpu); replicas are for kind inference")
        fleet = {c: kw.pop(c) for c in FLEET_COLUMNS if c in kw}
        if fleet:
            kw.update(_fleet_columns(p, s_id, fleet, kw.get("gpu_model")))
        try:
            meta[s_id] = SeriesMeta(timezone=timezone, **kw)
        except Exception as exc:
            raise InputError(f"{p}: series {s_id}: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None
    return LoadedHistory(frame, meta, notes, label=f"{p}", rows=pd.Series(np.arange(len(frame)) + 2, index=frame.index))


def _fleet_columns(p: Path, s_id: str, cols: dict[str, str], gpu_model: str | None) -> dict:
    """The fleet columns of one series as SeriesMeta extras (``gpu_models`` a list, ``min_gpu_memory_gb`` a
    float, ``share`` a float or a MIG profile name). Raises InputError naming the file, series and column of a
    bad value, an unknown model or profile, or a floor no allowed model holds (checked against the built-in
    catalogue, :func:`capplan.config.fleet.check_series_keys`)."""
    from pydantic import ValidationError


    try:
        keys = SeriesFleetKeys.model_validate(cols)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{p}: series {s_id}: column {err['loc'][0]}: {err['msg']}") from None
    try:
        check_series_keys(s_id, catalogue_from({}), keys.gpu_models, keys.min_gpu_memory_gb, keys.share, gpu_model)
    except ValueError as exc:
        raise InputError(f"{p}: {exc}") from None
    return keys.model_dump(exclude_none=True)


def load_csv(arg: str, *, timezone: str = "UTC", **_) -> LoadedHistory:
    p, df = _read("csv", arg)
    return _finish(p, df, timezone)


def load_parquet(arg: str, *, timezone: str = "UTC", **_) -> LoadedHistory:
    p, df = _read("parquet", arg)
    return _finish(p, df, timezone)
