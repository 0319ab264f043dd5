"""Pull history from a Prometheus-compatible store into the local store.

What a pull guarantees (the HTTP side is :mod:`capplan.prometheus.client`, the
grid and parsing :mod:`capplan.prometheus.parse`):

* **Incremental.** Without ``--start`` a pull resumes one step after the
  store's last timestamp (first pull: ``prometheus.default_lookback``, 30 days);
  a range that came back partial (``warnings`` of a Thanos/Mimir answer) is
  pulled again by the next ingest (``refill_from`` in the series state).
* **What a point means**: the query is rewritten so that a point is the peak
  of its step (``step_aggregation: max``, default) or its last value, with the
  same result under closed (Prometheus 2.x) and left-open (VictoriaMetrics,
  Prometheus 3) range semantics (:mod:`capplan.promql.steps`). Implausible
  values (``+Inf``, ``1e308``) become missing with a note
  (:mod:`capplan.sources.implausible`).
* **Zero versus missing.** The report lists the idle (0) and missing steps of
  every pull (:mod:`capplan.prometheus.coverage`).
* **Nothing is dropped silently**: server warnings become notes on the
  series; a series that returned nothing after data existed is reported as
  ``stopped`` with the likely causes, never as up to date; a 200 answer with
  bad content fails that series with a message naming it and the query.
* **All or nothing per series.** Chunks are collected in memory and the
  series is written with one :meth:`capplan.store.local.Store.write_series` call
  after the last chunk, so a failure mid-pull leaves the stored series as it
  was.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Callable, Iterable

import numpy as np
import pandas as pd

from capplan.config.prometheus import parse_duration
from capplan.config.settings import CapplanConfig, SeriesConfig
from capplan.errors import InputError, SourceError
from capplan.prometheus.client import PrometheusClient
from capplan.prometheus.coverage import step_coverage
from capplan.prometheus.parse import check_result, chunk_ranges, combine, parse_values, to_frame
from capplan.promql.render import outer_aggregation
from capplan.promql.templates import TEMPLATES
from capplan.sources.implausible import mask_implausible
from capplan.store import atomic
from capplan.store.local import Store
from forecasting.types import HISTORY_COLUMNS, SeriesMeta

ChunkCallback = Callable[[str, int, int, int], None]
"""``on_chunk(series_id, chunk_index (1-based), n_chunks, points_so_far)``."""


@dataclass
class Pulled:
    """What :func:`pull_detail` got: the history ``frame``, ``notes`` (server warnings
    among them) and ``partial_from`` (epoch s of the first chunk the server marked
    partial, None when none was)."""

    frame: pd.DataFrame
    notes: list[str]
    partial_from: int | None = None


def pull(client: PrometheusClient, series: SeriesConfig, start_s: int, end_s: int,
         max_points: int | None = None, on_chunk: ChunkCallback | None = None) -> tuple[pd.DataFrame, list[str]]:
    """(history frame, notes) of :func:`pull_detail`."""
    got = pull_detail(client, series, start_s, end_s, max_points, on_chunk)
    return got.frame, got.notes


def pull_detail(client: PrometheusClient, series: SeriesConfig, start_s: int, end_s: int,
                max_points: int | None = None, on_chunk: ChunkCallback | None = None) -> Pulled:
    """Pull one series over ``[start_s, end_s]`` (epoch seconds, aligned inward to its step).

    The query sent is :meth:`SeriesConfig.pull_query` (per-step peak or last
    value, stale samples missing). Returns :class:`Pulled`; a server's
    ``warnings`` become notes and set ``partial_from``. Nothing is written.
    Raises PrometheusError (see :meth:`PrometheusClient.query_range`;
    a 200 answer with bad content, :func:`check_result`) or SourceError
    (overlapping label sets without an aggregation).
    """
    query = series.promql(client.cfg.exported_labels)
    sent = series.pull_query(client.cfg)
    step = series.step_seconds()
    chunks = chunk_ranges(start_s, end_s, step, max_points or client.cfg.max_points_per_request)
    parts: list[tuple[dict, np.ndarray, np.ndarray]] = []
    warned: dict[str, int] = {}
    moved: set[str] = set()
    partial_from = None
    n = 0
    for i, (cs, ce) in enumerate(chunks, 1):
        answer = client.query_range(sent, cs, ce, step, series_id=series.id)
        if answer.redirected_to:
            moved.add(answer.redirected_to)
        if answer.warnings:
            partial_from = cs if partial_from is None else partial_from
            for w in answer.warnings:
                warned[client.scrub(w)] = warned.get(client.scrub(w), 0) + 1
        for r in check_result(answer, f"series {series.id}: query {sent!r}"):
            if "values" not in r:
                continue
            t, x = parse_values(r["values"], step)
            parts.append((r.get("metric", {}), t, x))
            n += len(t)
        if on_chunk:
            on_chunk(series.id, i, len(chunks), n)
    how = series.combination(client.cfg)
    what = f"series {series.id}: query {query!r}"
    if how is None and len({tuple(sorted(lbl.items())) for lbl, _, _ in parts}) > 1:
        # label sets with no aggregation: a step may hold the end of one and the start of the next (a rename);
        # they are joined (max per step) only if Prometheus never sees two of them at once within a step
        most = _most_at_once(client, series, chunks)
        if most > 1:
            combine(parts, None, what)  # raises, naming the first overlap
            raise SourceError(f"{what}: up to {most} label sets at once within a step; wrap the query in an "
                              "aggregation such as sum(...) or set `aggregate: sum|avg|max|min` for the series")
        ts, vals, _ = combine(parts, "max", what)
        notes = [f"{len({tuple(sorted(p[0].items())) for p in parts})} label sets followed each other in time "
                 "(e.g. renamed labels); joined"]
    else:
        ts, vals, notes = combine(parts, how, what)
    for origin in sorted(moved):
        notes.append(f"answered by {origin}: {client.cfg.url} redirected there (another host or port), so the "
                     "credentials and secret headers were not sent; check prometheus.url if that host is not yours")
    for w, k in warned.items():
        notes.append(f"the server warned (the answer may be partial; the next ingest pulls this range again): "
                     f"{w[:300]}" + (f" (in {k} of {len(chunks)} requests)" if len(chunks) > 1 else ""))
    return Pulled(to_frame(series.id, ts, vals), notes, partial_from)


def _most_at_once(client: PrometheusClient, series: SeriesConfig, chunks: list[tuple[int, int]]) -> int:
    """The most label sets of the series' query present at one instant (at the
    scrape-interval resolution) in any step of ``chunks``."""
    q = series.pull_query(client.cfg, count=True)
    most = 0.0
    for cs, ce in chunks:
        for r in check_result(client.query_range(q, cs, ce, series.step_seconds(), series_id=series.id),
                              f"series {series.id}: query {q!r}"):
            vals = [float(v[1]) for v in r.get("values", [])]
            most = max([most, *vals])
    return int(most)


@dataclass
class IngestResult:
    """Outcome of one series' ingest. ``status``: ok, up-to-date (no whole step to pull yet),
    stopped (a window returned nothing although data was stored before: a warning, exit 0),
    empty (a first pull returned nothing) or failed; ``exit_code``: 0, 2 (bad input: 4xx,
    empty first pull) or 1 (unreachable, 5xx). ``idle_steps``/``missing_steps`` and their
    ranges: steps stored as 0 (exporter up, nothing requested) and steps without a value
    (exporter down) of this pull (:mod:`capplan.prometheus.coverage`)."""

    series_id: str
    status: str
    new_points: int = 0
    total_points: int = 0
    first: str | None = None
    last: str | None = None
    range_start: str | None = None
    range_end: str | None = None
    seconds: float = 0.0
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    exit_code: int = 0
    idle_steps: int = 0
    missing_steps: int = 0
    idle_ranges: list[str] = field(default_factory=list)
    missing_ranges: list[str] = field(default_factory=list)
    warning: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def _iso(epoch_s: int) -> str:
    return pd.Timestamp(epoch_s, unit="s", tz="UTC").isoformat()


def to_epoch(ts: str | datetime | pd.Timestamp, name: str) -> int:
    """ISO 8601 (naive = UTC) or datetime -> epoch seconds. Raises InputError naming ``name``."""
    try:
        t = pd.Timestamp(ts)
    except (ValueError, TypeError):
        raise InputError(f"{name} {ts!r}: not an ISO 8601 time such as 2024-05-01T00:00:00Z") from None
    if t is pd.NaT:
        raise InputError(f"{name} {ts!r}: not an ISO 8601 time")
    t = t.tz_localize("UTC") if t.tzinfo is None else t.tz_convert("UTC")
    return int(math.floor(t.value / 1e9))


def ingest_series(client: PrometheusClient, store: Store, series: SeriesConfig, *, start: int | None = None,
                  end: int | None = None, lookback_s: int = 30 * 86400,
                  on_chunk: ChunkCallback | None = None) -> IngestResult:
    """Pull one series into the store (all or nothing) and say what happened.

    ``start``/``end`` are epoch seconds; ``start`` None resumes one step after
    the stored last timestamp (or ``end - lookback_s`` on a first pull), or
    from the start of a range an earlier pull got partial answers for;
    ``end`` None is now. New points replace stored ones at equal timestamps.
    Errors are returned in the result (status ``failed``), not raised.
    """
    t0 = time.perf_counter()
    step = series.step_seconds()
    end_s = int(time.time()) if end is None else end
    last = store.last_timestamp(series.id)
    try:
        old, _, old_state = store.read_series(series.id)
    except KeyError:
        old, old_state = None, {}
    if start is None:
        start_s = int(last.value // 10**9) + step if last is not None else end_s - lookback_s
        if old_state.get("refill_from") is not None:
            start_s = min(start_s, int(old_state["refill_from"]))
    else:
        start_s = start
    res = IngestResult(series.id, "ok")
    chunks = chunk_ranges(start_s, end_s, step, client.cfg.max_points_per_request)
    if chunks:
        res.range_start, res.range_end = _iso(chunks[0][0]), _iso(chunks[-1][1])
    try:
        got = pull_detail(client, series, start_s, end_s, on_chunk=on_chunk) if chunks else Pulled(to_frame(
            series.id, np.empty(0, np.int64), np.empty(0)), [])
    except SourceError as exc:
        res.status, res.error = "failed", str(exc)
        res.exit_code = 2 if getattr(exc, "bad_input", True) else 1
        res.seconds = time.perf_counter() - t0
        return res
    new, bad = mask_implausible(got.frame)
    res.notes = got.notes + [n.split(": ", 1)[1] for n in bad]
    neg = int((new["value"] < 0).sum())
    if neg:  # stored as pulled (the store keeps what the server said); a plan clips them to 0 and warns
        first = new.loc[new["value"] < 0].iloc[0]
        res.notes.append(f"{neg} negative value(s) stored as pulled (first {first['value']:.6g} at "
                         f"{first['timestamp'].isoformat()}); demand cannot be negative, so a plan clips them to 0: "
                         "if the query is a rate of a counter that reset, or a difference, fix it at its source")
    query = series.promql(client.cfg.exported_labels)
    cov = step_coverage(new, chunks, step)
    res.idle_steps, res.missing_steps = cov.idle_steps, cov.missing_steps
    res.idle_ranges, res.missing_ranges = cov.idle_ranges, cov.missing_ranges
    if new.empty and chunks and old is not None and len(old):
        cov_note = None  # the warning below says it
    else:
        cov_note = cov.note()
    if cov_note:
        res.notes.append(cov_note)
    if old_state.get("query") not in (None, query):
        res.notes.append("the query changed since the last pull; stored points from the old query were kept")
    res.new_points = int(len(new))
    if new.empty:
        res.total_points = 0 if old is None else int(len(old))
        if old is None:
            res.status, res.exit_code = "empty", 2
            res.error = (f"series {series.id}: query {query!r} returned no samples between {res.range_start} and "
                         f"{res.range_end}; check the selector and the range (a template answers 0 while its exporter "
                         "reports, so nothing at all also means the exporter sent nothing in that range)")
        else:
            res.first, res.last = old["timestamp"].min().isoformat(), old["timestamp"].max().isoformat()
            res.status = "stopped" if chunks else "up-to-date"
            if chunks:
                res.warning = (
                    f"series {series.id}: query {query!r} returned nothing between {res.range_start} and "
                    f"{res.range_end} although {len(old):,} points were stored up to {res.last}; the series "
                    "stopped: likely a label or metric rename (check the selector against the labels the exporter "
                    "sends now) or its exporter is gone or down (check up{...} and the exporter's own series)")
                res.notes.append(res.warning)
        res.seconds = time.perf_counter() - t0
        return res
    if old is not None and len(old):
        old = old[~old["timestamp"].isin(new["timestamp"])]
        merged = pd.concat([old[HISTORY_COLUMNS], new], ignore_index=True)
    else:
        merged = new
    merged = merged.sort_values("timestamp", kind="stable").reset_index(drop=True)
    merged["timestamp"] = merged["timestamp"].astype("datetime64[ns, UTC]")
    merged["value"] = merged["value"].astype("float64")
    tmpl = TEMPLATES.get(series.template or "")
    meta = SeriesMeta(kind=series.kind, unit=series.unit, gpu_model=series.gpu_model, timezone=series.timezone,
                      gpus_per_replica=series.gpus_per_replica,
                      query_unit=tmpl.unit if tmpl else None)
    state = {"source": "prometheus", "url": client.cfg.url, "query": query, "template": series.template,
             "pulled_query": series.pull_query(client.cfg), "step_aggregation": series.step_aggregation,
             "step_s": step, "pulled_from": res.range_start, "pulled_until": res.range_end,
             "aggregate": series.aggregate or outer_aggregation(query), "notes": res.notes,
             "refill_from": got.partial_from, "idle_ranges": res.idle_ranges, "missing_ranges": res.missing_ranges}
    store.write_series(series.id, merged, meta, state)
    res.total_points = int(len(merged))
    res.first, res.last = merged["timestamp"].iloc[0].isoformat(), merged["timestamp"].iloc[-1].isoformat()
    res.seconds = time.perf_counter() - t0
    return res


def ingest(cfg: CapplanConfig, store: Store | None = None, *, start: str | None = None, end: str | None = None,
           series_ids: Iterable[str] | None = None, on_chunk: ChunkCallback | None = None,
           on_series: Callable[[IngestResult], None] | None = None, env: dict | None = None) -> list[IngestResult]:
    """Pull the config's series (or ``series_ids``) into the store, one series at a time.

    ``start``/``end``: ISO 8601 (naive = UTC); see :func:`ingest_series`.
    Raises InputError when the config has no ``prometheus`` or no ``series``,
    for an unknown series id, a bad time or start >= end. Per-series failures
    are in the results.
    """
    if cfg.prometheus is None:
        raise InputError("config: no `prometheus:` section; add `prometheus: {url: http://127.0.0.1:9090}`")
    if not cfg.series:
        raise InputError("config: no `series:` to ingest")
    by_id = {s.id: s for s in cfg.series}
    ids = list(series_ids or by_id)
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise InputError(f"--series {', '.join(unknown)}: not in the config; known: {', '.join(by_id)}")
    s_s = to_epoch(start, "--start") if start else None
    e_s = to_epoch(end, "--end") if end else None
    if s_s is not None and e_s is not None and s_s >= e_s:
        raise InputError(f"--start {start} must be before --end {end}")
    store = store or Store(cfg.store)
    atomic.clean_stale(store.history_dir)  # temporaries of a pull that was killed
    client = PrometheusClient(cfg.prometheus, env=env)
    lookback = parse_duration(cfg.prometheus.default_lookback)
    results = []
    try:
        for sid in ids:
            r = ingest_series(client, store, by_id[sid], start=s_s, end=e_s, lookback_s=lookback, on_chunk=on_chunk)
            results.append(r)
            if on_series:
                on_series(r)
    finally:
        client.close()
    return results
