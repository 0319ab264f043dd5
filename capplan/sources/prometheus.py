"""Pull history from Prometheus (``prometheus-api-client``) into the local store.

What this module guarantees (issue 3):

* **Chunks on the step grid.** A range is cut into ``query_range`` requests
  of at most ``prometheus.max_points_per_request`` points (default 11,000,
  Prometheus' own limit is 11,000 steps per series). Every chunk starts on a
  multiple of the step since the Unix epoch, and the next chunk starts one
  step after the previous end, so chunks never overlap or shift.
* **Values are strings** in the API (``"1.5"``, ``"NaN"``, ``"+Inf"``); they
  are parsed to float64 (NaN and +/-inf kept as such). Epoch seconds become
  ``datetime64[ns, UTC]``.
* **Label-set changes** (pod restarts, renamed labels): when a query returns
  several label sets they are combined per timestamp with the query's outer
  aggregation (``sum by (pod) (...)`` -> sum), or the series' ``aggregate``
  setting. Without either, label sets may follow each other in time but must
  not overlap; an overlap is an error, never silently dropped or double counted.
* **Incremental.** Without ``--start`` a pull resumes one step after the
  store's last timestamp (first pull: ``prometheus.default_lookback``, 30 days).
* **Retries** with exponential backoff (tenacity) on timeouts, connection
  errors, HTTP 5xx and 429: ``prometheus.retries`` (4) retries, first wait
  ``prometheus.backoff_s`` (1 s), doubling, capped at 30 s.
* **Clear 4xx errors** naming the series id, the query and Prometheus' own
  error text; credentials (read only from the environment) never appear in a
  message.
* **What a point means** (issue 15): the query is rewritten so that a point is
  the peak of its step (``step_aggregation: max``, default) or its last value
  (``last``), and a sample counts only within ``scrape_interval`` of its scrape,
  so points after a series' last real sample are missing, never repeated
  (:mod:`capplan.promql_steps`). Implausible values (``+Inf``, ``1e308``)
  become missing with a note (:mod:`capplan.sources.implausible`), as in
  ``plan`` and ``backtest``.
* **Bad content in a 200 answer** (no ``data``, a value ``"abc"``) fails that
  series with a message naming it and the query; the other series are still
  pulled, and ``ingest`` exits non-zero.
* **timeout_s is a deadline for the whole request** (connect, headers and the
  body), not only for each read: a server trickling bytes is cut off and the
  message says "timed out".
* **All or nothing per series.** Chunks are collected in memory and the
  series is written with one :meth:`capplan.store.Store.write_series` call
  after the last chunk, so a failure mid-pull leaves the stored series as it
  was.
"""

from __future__ import annotations

import ast
import base64
import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone as dt_tz
from typing import Callable, Iterable

import numpy as np
import pandas as pd
import requests
import tenacity
import urllib3
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from urllib3.util.retry import Retry

from capplan import atomic
from capplan.config import CapplanConfig, PrometheusConfig, SeriesConfig, parse_duration
from capplan.errors import InputError, SourceError, looks_like_name
from capplan.promql import TEMPLATES, outer_aggregation
from capplan.sources.implausible import mask_implausible
from capplan.store import Store
from forecasting.types import HISTORY_COLUMNS, SeriesMeta

ChunkCallback = Callable[[str, int, int, int], None]
"""``on_chunk(series_id, chunk_index (1-based), n_chunks, points_so_far)``."""


class PrometheusError(SourceError):
    """A request failed for good. ``status`` is the HTTP status (None: no response);
    ``bad_input`` is True for 4xx (a bad query or refused credentials): exit code 2."""

    def __init__(self, message: str, status: int | None = None, bad_input: bool | None = None):
        super().__init__(message)
        self.status = status
        self.bad_input = (status is not None and 400 <= status < 500 and status != 429) if bad_input is None \
            else bad_input


class _Transient(Exception):
    """A failure worth retrying (timeout, connection error, 5xx, 429)."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


# -- grid and chunks -----------------------------------------------------------------
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


# -- parsing ------------------------------------------------------------------------
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


def check_result(result, what: str) -> list[dict]:
    """The ``data.result`` list of a 200 answer, checked: a list of
    ``{"metric": {...}, "values": [[epoch_s, "number"], ...]}``.

    Raises PrometheusError (``bad_input`` False: exit code 1) naming ``what``
    (series and query) and the first fault.
    """
    if not isinstance(result, list):
        raise PrometheusError(f"{what}: Prometheus answered 200 without a matrix result ({type(result).__name__})",
                              bad_input=False)
    for r in result:
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


def combine(parts: list[tuple[dict, np.ndarray, np.ndarray]], how: str | None, what: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Combine the label sets a query returned into one series.

    ``parts``: (labels, epoch ms, values) per label set and chunk. ``how``:
    sum, avg, max, min (count -> sum, group -> max) or None. With None, label
    sets must not overlap in time. Returns (epoch ms sorted, values, notes).

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
        keep = np.ones(len(ts), bool)
        keep[1:] = ts[1:] != ts[:-1]
        return ts[keep], x[keep], notes
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


# -- the client ------------------------------------------------------------------------
_STATUS_RE = re.compile(r"HTTP Status Code (\d+) \((.*)\)\s*$", re.S)


def _prom_error_text(raw: str) -> str:
    """Prometheus' own error text from a response body repr (``b'{"status":"error",...}'``)."""
    try:
        body = ast.literal_eval(raw)
        body = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    except (ValueError, SyntaxError):
        body = raw
    try:
        doc = json.loads(body)
        if isinstance(doc, dict) and "error" in doc:
            return f"{doc.get('errorType', 'error')}: {doc['error']}"
    except ValueError:
        pass
    return body.strip()[:500] or "(empty body)"


class _DeadlineSession(requests.Session):
    """A session whose requests must complete, body included, within ``deadline_s``.

    ``requests``' own timeout bounds each socket read, so a server sending one
    byte a second never times out; here the body is read in chunks and the
    request fails with :class:`requests.Timeout` once the deadline passes.
    """

    def __init__(self, deadline_s: float):
        super().__init__()
        self.deadline_s = deadline_s

    def request(self, method, url, **kw):
        end = time.monotonic() + self.deadline_s
        kw["stream"] = True
        resp = super().request(method, url, **kw)
        chunks = []
        try:
            while True:  # read1: whatever has arrived (read(n) would wait for n bytes of a trickle)
                try:
                    chunk = resp.raw.read1(65536, decode_content=True)
                except urllib3.exceptions.ReadTimeoutError:
                    raise requests.Timeout(f"timed out: no byte within {self.deadline_s:g} s") from None
                except urllib3.exceptions.HTTPError as exc:
                    raise requests.ConnectionError(str(exc)) from None
                if not chunk:
                    break
                chunks.append(chunk)
                if time.monotonic() > end:
                    raise requests.Timeout(f"timed out: no complete answer within {self.deadline_s:g} s")
        finally:
            resp.close()
        resp._content = b"".join(chunks)
        resp._content_consumed = True
        return resp


def _timed_out(exc: BaseException) -> bool:
    """True when a ``requests`` error is a timeout in disguise (a read timeout
    while streaming the body surfaces as ConnectionError)."""
    seen = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, (requests.Timeout, TimeoutError)) or "timed out" in str(e).lower():
            return True
        e = e.__cause__ or e.__context__ or (e.args[0] if e.args and isinstance(e.args[0], BaseException) else None)
    return False


_AUTH_HEADER_RE = re.compile(r"(?i)((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
                             r"(?:[a-z]+ +)?[A-Za-z0-9+/=._~%:-]+")
"""An echoed ``Authorization: <scheme> <credentials>`` (or ``"authorization": "..."``) value."""


def _credential(env, name: str, key: str, token: bool) -> str:
    """The credential in environment variable ``name`` (config key ``key`` names it), without
    a trailing newline (a secret mounted from a file often ends in one). A bearer token
    (``token``) also loses surrounding whitespace and may hold none inside; a basic-auth
    password may (it travels base64-encoded).

    Raises InputError when the variable is unset or empty, or a token holds whitespace or
    control characters inside (an HTTP header cannot carry them); the message never shows
    the value."""
    raw = env.get(name, "")
    val = raw.strip() if token else raw.rstrip("\r\n")
    if not val:
        named = f"environment variable {name}" if looks_like_name(name) else (
            "the environment variable it names (the name is not shown: it does not look like a variable name; "
            "put the variable's name there, not the secret)")
        raise InputError(f"{key}: {named} is not set" + (" (only whitespace)" if raw else ""))
    if token and any(c.isspace() or not c.isprintable() for c in val):
        raise InputError(f"{key}: environment variable {name} holds whitespace or control characters inside "
                         "the token; an HTTP header cannot carry them (check how the secret was created)")
    return val


class PrometheusClient:
    """One Prometheus endpoint, configured from ``prometheus:`` of the config.

    Credentials come from the environment only: the bearer token from the
    variable named by ``bearer_token_env``, the basic-auth password from
    ``basic_auth.password_env``. TLS is verified (with ``ca_file`` if set)
    unless ``verify_tls: false``.

    Raises InputError when a named environment variable is unset or empty.
    """

    def __init__(self, cfg: PrometheusConfig, env: dict | None = None):
        env = os.environ if env is None else env
        self.cfg = cfg
        self._secrets: list[str] = []
        headers, auth = {}, None
        if cfg.bearer_token_env:
            tok = _credential(env, cfg.bearer_token_env, "prometheus.bearer_token_env", token=True)
            headers["Authorization"] = f"Bearer {tok}"
            self._secrets += [f"Bearer {tok}", tok]
        if cfg.basic_auth:
            pw = _credential(env, cfg.basic_auth.password_env, "prometheus.basic_auth.password_env", token=False)
            auth = (cfg.basic_auth.username, pw)
            b64 = base64.b64encode(f"{cfg.basic_auth.username}:{pw}".encode("utf-8")).decode("ascii")
            self._secrets += [f"Basic {b64}", b64, pw]
        session = _DeadlineSession(cfg.timeout_s)
        if cfg.ca_file:
            if not os.path.isfile(cfg.ca_file):
                raise InputError(f"prometheus.ca_file: {cfg.ca_file}: file not found")
            session.verify = cfg.ca_file
        else:
            session.verify = bool(cfg.verify_tls)
        self._prom = PrometheusConnect(url=cfg.url, headers=headers or None, auth=auth, session=session,
                                       retry=Retry(total=0, raise_on_status=False), timeout=cfg.timeout_s)
        self._auth_hint = (f"bearer token from ${cfg.bearer_token_env}" if cfg.bearer_token_env else
                           f"basic auth as {cfg.basic_auth.username!r} with password from ${cfg.basic_auth.password_env}"
                           if cfg.basic_auth else "no credentials configured")

    def close(self) -> None:
        self._prom.close()

    def scrub(self, text: str) -> str:
        """``text`` with every credential replaced by ``***``: the bearer token, the
        basic-auth password and the base64 of ``user:password`` (whole header values
        first, each also as Python's repr escapes it), and any echoed
        ``Authorization: ...`` header value whatever it holds."""
        for s in self._secrets:
            for form in dict.fromkeys((s, repr(s)[1:-1])):
                if form:
                    text = text.replace(form, "***")
        return _AUTH_HEADER_RE.sub(r"\1***", text)

    def _once(self, query: str, start_s: int, end_s: int, step_s: int) -> list:
        try:
            return self._prom.custom_query_range(
                query, datetime.fromtimestamp(start_s, dt_tz.utc), datetime.fromtimestamp(end_s, dt_tz.utc),
                step=str(step_s), params={"timeout": f"{self.cfg.timeout_s:g}s"})
        except PrometheusApiClientException as exc:
            m = _STATUS_RE.match(str(exc))
            status = int(m.group(1)) if m else None
            text = _prom_error_text(m.group(2)) if m else str(exc)
            if status is None or status >= 500 or status == 429:
                raise _Transient(f"HTTP {status}: {text}", status) from None
            raise PrometheusError(text, status) from None
        except (KeyError, TypeError):  # 200 without data.result: the answer is not Prometheus' query_range
            raise PrometheusError("Prometheus answered 200 without data.result (not a query_range answer; "
                                  "is the URL a Prometheus server?)", bad_input=False) from None
        except requests.Timeout:
            raise _Transient(f"timed out: no complete answer within timeout_s={self.cfg.timeout_s:g} s") from None
        except requests.exceptions.SSLError:
            raise PrometheusError("TLS verification failed (SSLError); set prometheus.ca_file to the "
                                  "server's CA bundle", bad_input=True) from None
        except requests.ConnectionError as exc:
            if _timed_out(exc):
                raise _Transient(f"timed out: no complete answer within timeout_s={self.cfg.timeout_s:g} s") from None
            reason = str(exc.args[0]) if exc.args else ""
            reason = re.sub(r".*\] ", "", reason.split("(Caused by ")[-1]).rstrip(")'\"") if reason else ""
            raise _Transient(f"cannot connect ({reason or type(exc).__name__})") from None
        except ValueError as exc:  # a body that is not JSON (a proxy's error page)
            raise _Transient(f"the answer is not Prometheus JSON ({exc})") from None

    def query_range(self, query: str, start_s: int, end_s: int, step_s: int, *, series_id: str = "?") -> list:
        """``/api/v1/query_range`` result list, retried on transient failures.

        Raises PrometheusError naming the series id, the query and
        Prometheus' error text (4xx at once; others after the retries).
        """
        what = f"series {series_id}: query {query!r}"
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.cfg.retries + 1),
            wait=tenacity.wait_exponential(multiplier=self.cfg.backoff_s, min=self.cfg.backoff_s, max=30),
            retry=tenacity.retry_if_exception_type(_Transient), reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    return self._once(query, start_s, end_s, step_s)
        except _Transient as exc:
            raise PrometheusError(self.scrub(
                f"{what}: Prometheus at {self.cfg.url} failed after {self.cfg.retries + 1} attempt(s): {exc}"),
                exc.status) from None
        except PrometheusError as exc:
            if exc.status is None:
                msg = f"{what}: Prometheus at {self.cfg.url}: {exc}"
            elif exc.status in (401, 403):
                msg = (f"{what}: Prometheus at {self.cfg.url} refused the credentials (HTTP {exc.status}: {exc}); "
                       f"check {self._auth_hint}")
            else:
                msg = f"{what}: Prometheus at {self.cfg.url} rejected the request (HTTP {exc.status}): {exc}"
            raise PrometheusError(self.scrub(msg), exc.status, exc.bad_input) from None
        raise AssertionError("unreachable")


# -- pulling one series ------------------------------------------------------------------
def pull(client: PrometheusClient, series: SeriesConfig, start_s: int, end_s: int,
         max_points: int | None = None, on_chunk: ChunkCallback | None = None) -> tuple[pd.DataFrame, list[str]]:
    """Pull one series over ``[start_s, end_s]`` (epoch seconds, aligned inward to its step).

    The query sent is :meth:`SeriesConfig.pull_query` (per-step peak or last
    value, stale samples missing). Returns (history frame, notes). Nothing is
    written. Raises PrometheusError (see :meth:`PrometheusClient.query_range`;
    a 200 answer with bad content, :func:`check_result`) or SourceError
    (overlapping label sets without an aggregation).
    """
    query = series.promql(client.cfg.exported_labels)
    sent = series.pull_query(client.cfg)
    step = series.step_seconds()
    chunks = chunk_ranges(start_s, end_s, step, max_points or client.cfg.max_points_per_request)
    parts: list[tuple[dict, np.ndarray, np.ndarray]] = []
    n = 0
    for i, (cs, ce) in enumerate(chunks, 1):
        result = client.query_range(sent, cs, ce, step, series_id=series.id)
        for r in check_result(result, f"series {series.id}: query {sent!r}"):
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
    return to_frame(series.id, ts, vals), notes


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
    """Outcome of one series' ingest. ``status``: ok, up-to-date, empty or failed;
    ``exit_code``: 0, 2 (bad input: 4xx, empty first pull) or 1 (unreachable, 5xx)."""

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
    the stored last timestamp (or ``end - lookback_s`` on a first pull),
    ``end`` None is now. New points replace stored ones at equal timestamps.
    Errors are returned in the result (status ``failed``), not raised.
    """
    t0 = time.perf_counter()
    step = series.step_seconds()
    end_s = int(time.time()) if end is None else end
    last = store.last_timestamp(series.id)
    if start is None:
        start_s = int(last.value // 10**9) + step if last is not None else end_s - lookback_s
    else:
        start_s = start
    res = IngestResult(series.id, "ok")
    chunks = chunk_ranges(start_s, end_s, step, client.cfg.max_points_per_request)
    if chunks:
        res.range_start, res.range_end = _iso(chunks[0][0]), _iso(chunks[-1][1])
    try:
        new, notes = pull(client, series, start_s, end_s, on_chunk=on_chunk) if chunks else (to_frame(
            series.id, np.empty(0, np.int64), np.empty(0)), [])
    except SourceError as exc:
        res.status, res.error = "failed", str(exc)
        res.exit_code = 2 if getattr(exc, "bad_input", True) else 1
        res.seconds = time.perf_counter() - t0
        return res
    new, bad = mask_implausible(new)
    res.notes = notes + [n.split(": ", 1)[1] for n in bad]
    query = series.promql(client.cfg.exported_labels)
    try:
        old, _, old_state = store.read_series(series.id)
    except KeyError:
        old, old_state = None, {}
    if old_state.get("query") not in (None, query):
        res.notes.append("the query changed since the last pull; stored points from the old query were kept")
    res.new_points = int(len(new))
    if new.empty:
        res.total_points = 0 if old is None else int(len(old))
        if old is None:
            res.status, res.exit_code = "empty", 2
            res.error = (f"series {series.id}: query {query!r} returned no samples between {res.range_start} and "
                         f"{res.range_end}; check the selector and the range")
        else:
            res.status = "up-to-date"
            res.first, res.last = old["timestamp"].min().isoformat(), old["timestamp"].max().isoformat()
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
             "aggregate": series.aggregate or outer_aggregation(query), "notes": res.notes}
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
