"""Pure helpers of a Prometheus pull: the step grid, parsing and checking answers,
and combining label sets into one series. No network.

* **Chunks on the step grid.** A range is cut into ``query_range`` requests of
  at most ``prometheus.max_points_per_request`` points (Prometheus allows 11,000
  per series). Every chunk starts on a multiple of the step since the Unix
  epoch, and the next starts one step after the previous end.
* **Values are strings** in the API (``"1.5"``, ``"NaN"``, ``"+Inf"``); they
  are parsed to float64. Epoch seconds become ``datetime64[ns, UTC]``.
* **Label-set changes** are combined per timestamp with the query's outer
  aggregation or the series' ``aggregate``; without either, label sets may
  follow each other in time but must not overlap (:func:`combine`).
* **Answers that cannot be a demand series** (vector or scalar answers,
  native histograms) are refused whole with the reason (:func:`check_result`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from capplan.errors import SourceError
from capplan.prometheus.client import PrometheusClient, PrometheusError


def chunk_ranges(start_s: int, end_s: int, step_s: int, max_points: int = 11000) -> list[tuple[int, int]]:
    """Split ``[start_s, end_s]`` (epoch seconds) into query_range windows on the step grid.

    ``start_s`` is rounded up and ``end_s`` down to multiples of ``step_s``;
    each window holds at most ``max_points`` grid points (both ends included)
    and the next starts one step after the previous end. Empty list when the
    aligned range is empty.
    """
    if step_s <= 0 or max_points < 1:
        raise ValueError("step_s and max_points must be positive")
    s = -(-start_s // step_s) * step_s
    e = (end_s // step_s) * step_s
    out = []
    while s <= e:
        ce = min(e, s + (max_points - 1) * step_s)
        out.append((s, ce))
        s = ce + step_s
    return out


def parse_values(values: list, step_s: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``[[epoch_s, "value"], ...]`` -> (int64 epoch milliseconds, float64 values).

    ``"NaN"``, ``"+Inf"`` and ``"-Inf"`` parse to nan, inf and -inf. With
    ``step_s``, a gap-free run (Prometheus returns sorted grid points, so the
    span equals (n - 1) steps) gets its timestamps by arithmetic instead of a
    per-point conversion.
    """
    n = len(values)
    x = np.array([v[1] for v in values], dtype=np.float64)  # ValueError on "abc": see check_result
    if n > 1 and step_s:
        t0 = int(round(values[0][0] * 1000))
        if int(round(values[-1][0] * 1000)) - t0 == (n - 1) * step_s * 1000:
            return t0 + np.arange(n, dtype=np.int64) * (step_s * 1000), x
    ts = np.fromiter((v[0] for v in values), dtype=np.float64, count=n)
    return np.rint(ts * 1000.0).astype(np.int64), x


def check_result(answer, what: str) -> list[dict]:
    """The ``data.result`` list of a 200 answer, checked: a matrix, i.e. a list of
    ``{"metric": {...}, "values": [[epoch_s, "number"], ...]}``.

    ``answer``: a :class:`capplan.prometheus.client.Answer` or the bare result list.
    Raises PrometheusError (``bad_input`` True: exit code 2) for a vector, scalar or
    string answer (the query is an instant expression; a range pull needs a matrix) and
    for native-histogram samples (``histograms``: a distribution per point that one
    demand number cannot hold; wrap the query in ``histogram_quantile``,
    ``histogram_count`` or ``histogram_sum``), so such an answer is refused whole, never
    half-kept; and (``bad_input`` False: exit code 1) for a malformed series or sample.
    """
    result = getattr(answer, "result", answer)
    rtype = getattr(answer, "result_type", None)
    if rtype not in (None, "matrix"):
        raise PrometheusError(f"{what}: the server answered a {rtype}, not a range of samples (matrix); a pull "
                              "needs an expression that yields series over time (no scalar(), no instant "
                              "functions such as time())", bad_input=True)
    if not isinstance(result, list):
        raise PrometheusError(f"{what}: Prometheus answered 200 without a matrix result ({type(result).__name__})",
                              bad_input=False)
    for r in result:
        if isinstance(r, dict) and r.get("histograms"):
            n_h, n_f = len(r["histograms"]), len(r.get("values") or [])
            raise PrometheusError(
                f"{what}: series {_labels(r.get('metric'))} holds native-histogram samples ({n_h} points"
                + (f", beside {n_f} float points" if n_f else "") + "); a demand series needs one number per step: "
                "wrap the selector in histogram_count(...), histogram_sum(...) or histogram_quantile(q, ...)",
                bad_input=True)
        if not isinstance(r, dict) or not isinstance(r.get("metric", {}), dict) or \
                not isinstance(r.get("values", []), list):
            raise PrometheusError(f"{what}: Prometheus answered 200 with a malformed series: {str(r)[:120]}",
                                  bad_input=False)
        for v in r.get("values", []):
            ok = isinstance(v, (list, tuple)) and len(v) == 2 and isinstance(v[0], (int, float))
            if ok:
                try:
                    float(v[1])
                except (TypeError, ValueError):
                    ok = False
            if not ok:
                raise PrometheusError(f"{what}: Prometheus answered 200 with a bad sample {str(v)[:80]} "
                                      "(expected [epoch seconds, \"number\"])", bad_input=False)
    return result


def _labels(metric) -> str:
    """``{k="v", ...}`` of a result's labels, for messages."""
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted((metric or {}).items())) + "}"


def combine(parts: list[tuple[dict, np.ndarray, np.ndarray]], how: str | None,
            what: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Combine the label sets a query returned into one series.

    ``parts``: (labels, epoch ms, values) per label set and chunk. ``how``:
    sum, avg, max, min (count -> sum, group -> max) or None. With None, label
    sets must not overlap in time. Returns (epoch ms sorted, values, notes).

    One label set answered twice at a timestamp with different values keeps the largest, with a note
    (never silently the first).

    Raises SourceError (``what`` names series and query) when ``how`` is None
    and two label sets have a value at the same timestamp.
    """
    notes: list[str] = []
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.float64), notes
    keys = {tuple(sorted(lbl.items())) for lbl, _, _ in parts}
    ts = np.concatenate([p[1] for p in parts])
    x = np.concatenate([p[2] for p in parts])
    if len(keys) == 1:
        order = np.argsort(ts, kind="stable")
        ts, x = ts[order], x[order]
        first = np.ones(len(ts), bool)
        first[1:] = ts[1:] != ts[:-1]
        if first.all():
            return ts, x, notes
        # one timestamp answered twice (overlapping chunks, a federated or deduplicating store): equal
        # values are one sample; different values keep the largest, as regularising does (demand is a peak)
        g = pd.Series(x).groupby(ts, sort=True)
        top, distinct = g.max(), g.nunique()
        if (distinct > 1).any():
            t0 = pd.Timestamp(int(distinct.index[distinct.to_numpy() > 1][0]), unit="ms", tz="UTC")
            notes.append(f"{int((distinct > 1).sum())} timestamps were answered more than once with different "
                         f"values (first at {t0.isoformat()}); the largest was kept (demand is a peak)")
        return top.index.to_numpy(np.int64), top.to_numpy(np.float64), notes
    how = {"count": "sum", "group": "max"}.get(how, how)
    frame = pd.DataFrame({"t": ts, "v": x, "k": np.concatenate([np.full(len(p[1]), i) for i, p in enumerate(parts)])})
    if how is None:
        dup = frame["t"].duplicated(keep=False)
        if dup.any():
            t0 = pd.Timestamp(int(frame.loc[dup, "t"].iloc[0]), unit="ms", tz="UTC")
            raise SourceError(
                f"{what}: the query returned {len(keys)} label sets that overlap in time (first at {t0.isoformat()}); "
                "wrap it in an aggregation such as sum(...) or set `aggregate: sum|avg|max|min` for the series")
        notes.append(f"{len(keys)} label sets followed each other in time (e.g. renamed labels); joined")
        frame = frame.sort_values("t")
        return frame["t"].to_numpy(np.int64), frame["v"].to_numpy(np.float64), notes
    g = frame.groupby("t", sort=True)["v"]
    agg = {"sum": g.sum, "avg": g.mean, "max": g.max, "min": g.min}[how]()
    notes.append(f"{len(keys)} label sets combined with {how}")
    return agg.index.to_numpy(np.int64), agg.to_numpy(np.float64), notes


def to_frame(series_id: str, ts_ms: np.ndarray, values: np.ndarray) -> pd.DataFrame:
    """History frame (series_id, timestamp datetime64[ns, UTC], value float64)."""
    return pd.DataFrame({
        "series_id": pd.Series([series_id] * len(ts_ms), dtype="object"),
        "timestamp": pd.to_datetime(ts_ms, unit="ms", utc=True).astype("datetime64[ns, UTC]"),
        "value": values.astype(np.float64),
    })


def instant(client: "PrometheusClient", query: str, at: int, what: str,
             told: Callable[[str], None] = lambda line: None) -> list[tuple[dict, float]]:
    """(labels, value) of ``query`` at ``at`` (a one-point query_range, so every engine answers alike);
    ``told`` gets a progress line first."""
    told(f"discover: asking {client.cfg.url} for {what}")
    out = []
    for r in check_result(client.query_range(query, at, at, 60, series_id=what), f"discover {what}: {query!r}"):
        vals = [float(v[1]) for v in r.get("values", [])]
        if vals and vals[-1] == vals[-1]:
            out.append((r.get("metric", {}), vals[-1]))
    return out
