"""The functions scheduled jobs (the Airflow DAGs in ``airflow_dags/``) call.

Each function is thin: it reads ``capplan.yaml``, runs the stage list of
:mod:`capplan.run.pipeline` and writes its outputs under the store, keyed by the
run's *logical date* and replaced atomically, so a rerun for the same logical
date replaces the same files and leaves one single set of outputs.

Store layout used by the jobs (``<ld>`` is :func:`ld_key` of the logical date;
the per-tier forecast files are described in :mod:`capplan.store.local`)::

    ingest/<ld>.json                              what one ingest run did (ok / failed series)
    forecasts/<tier>/<ld>/...                     each tier's forecasts per series, keyed by <ld>
    plans/<ld>/                                   the plan's output folder (policy.yaml, manifests/,
                                                  forecasts.parquet, report.json ...), swapped in whole
    runs/airflow-<ld>-s<seed>/                    the same folder as a store run (LATEST points to it)

DAG files import :mod:`capplan.airflow.keys` at parse time (standard library only) and this
module inside their tasks.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from capplan.airflow.keys import (
    PLAN_TIERS,
    PROMETHEUS_CONN_ID,
    JobError,
    ld_key,
)
from capplan.config.prometheus import BasicAuth, PrometheusConfig
from capplan.config.settings import load_config
from capplan.errors import InputError
from capplan.report import jsonout
from capplan.report.model import RunInfo, price_book_used, versions
from capplan.report.validation import validate_folder
from capplan.run import pipeline
from capplan.run.cache import prune
from capplan.run.stages.forecast import tier_forecasts
from capplan.run.stages.load import prepare
from capplan.run.state import Ledger, PlanState, TierResult
from capplan.sources import LoadedHistory, load_source
from capplan.sources import prometheus as prom
from capplan.store import atomic
from capplan.store.local import Store
from forecasting.types import SeriesMeta

# the names a Prometheus Connection's secrets are handed over under: keys of the environment mapping given to
# the Prometheus client only (never os.environ)
_PROM_TOKEN_ENV = "CAPPLAN_PROMETHEUS_TOKEN"
_PROM_PASSWORD_ENV = "CAPPLAN_PROMETHEUS_PASSWORD"


def _cfg(config_path):
    return load_config(config_path)


def _store(cfg):
    return Store(cfg.store)


def series_ids(config_path) -> list[str]:
    """The series the jobs work on: the config's ``series`` ids, or, when it
    lists none and selects the sample (``source: sample``), every series of the sample.

    Raises JobError when it lists none and does not select the sample."""
    cfg = _cfg(config_path)
    if cfg.series:
        return [s.id for s in cfg.series]
    if cfg.source != "sample":
        raise JobError("config lists no series: add `series:` (with a prometheus section or the Airflow "
                       f"Connection {PROMETHEUS_CONN_ID!r}), or set `source: sample` to plan the embedded sample")
    return sorted(load_source("sample").meta)


# -- ingest -----------------------------------------------------------------------
def connection_overrides(cfg, conn: dict | None) -> tuple[Any, dict[str, str]]:
    """Apply an Airflow Connection (``host``/``schema``/``port``, ``login``,
    ``password``, ``extra``) to ``cfg.prometheus`` without writing a secret anywhere.
    Returns ``(cfg, secrets)``: the config names variables (``bearer_token_env``,
    ``basic_auth.password_env``) that ``secrets`` holds; ``secrets`` is given to the
    Prometheus client as its environment mapping (:func:`ingest_one`), never put into
    ``os.environ``, so no other code of the worker sees it.

    ``extra`` keys: ``bearer_token`` (else ``password`` without ``login`` is a
    bearer token), ``ca_file``, ``verify_tls``, ``timeout_s``.
    """
    if not conn:
        return cfg, {}
    extra = conn.get("extra") or {}
    if isinstance(extra, str):
        extra = json.loads(extra) if extra.strip() else {}
    url = conn.get("uri_base") or ""
    if not url and conn.get("host"):
        host = conn["host"]
        scheme = conn.get("schema") or ("https" if extra.get("https") else "http")
        url = host if "://" in host else f"{scheme}://{host}"
        if conn.get("port"):
            url += f":{conn['port']}"
    base = cfg.prometheus.model_dump() if cfg.prometheus is not None else {}
    if url:
        base["url"] = url
    if not base.get("url"):
        raise JobError(f"Airflow Connection {PROMETHEUS_CONN_ID!r} has no host and the config no prometheus.url")
    token = extra.get("bearer_token") or (conn.get("password") if not conn.get("login") else None)
    secrets = {}
    if token:
        secrets[_PROM_TOKEN_ENV] = token
        base["bearer_token_env"], base["basic_auth"] = _PROM_TOKEN_ENV, None
    elif conn.get("login"):
        secrets[_PROM_PASSWORD_ENV] = conn.get("password") or ""
        base["basic_auth"] = BasicAuth(username=conn["login"], password_env=_PROM_PASSWORD_ENV).model_dump()
        base["bearer_token_env"] = None
    for k in ("ca_file", "verify_tls", "timeout_s"):
        if k in extra:
            base[k] = extra[k]
    cfg.prometheus = PrometheusConfig.model_validate(base)
    return cfg, secrets


def ingest_one(cfg, series_id: str, store, secrets: dict[str, str] | None = None) -> dict:
    """Pull new history of one configured series from Prometheus into ``store``
    (:func:`capplan.sources.prometheus.ingest`: resumes after the last stored point,
    all or nothing per series). ``secrets``: credentials from :func:`connection_overrides`,
    read by the client on top of the environment (a copy; ``os.environ`` is not changed).
    Returns the ingest result as a dict.

    Raises JobError when the pull failed (so that Airflow retries the task).
    """
    env = {**os.environ, **secrets} if secrets else None
    (res,) = prom.ingest(cfg, store, series_ids=[series_id], env=env)
    if res.status == "failed":
        raise JobError(f"ingest {series_id}: {res.error}")
    out = res.as_dict()
    out["rows"] = res.new_points
    return out


def ingest_series(config_path, series_id: str, conn: dict | None = None) -> dict:
    """Bring one series' history into the store.

    With ``source: sample`` in the config the series is copied from the embedded
    sample (a deterministic refresh, for demos and tests); otherwise
    :func:`ingest_one` pulls it from Prometheus (the config's ``prometheus:``
    section, overridden by the Airflow Connection ``conn``).

    Raises JobError when there is no Prometheus to pull from (no section, no
    Connection) and the config does not select the sample; InputError for a series
    that cannot be found.
    """
    cfg = _cfg(config_path)
    store = _store(cfg)
    if cfg.source == "sample":
        loaded = load_source("sample")
        f = loaded.frame[loaded.frame["series_id"] == series_id]
        if f.empty:
            raise InputError(f"series {series_id!r}: not in the embedded sample (the config selects `source: sample`)")
        meta = loaded.meta.get(series_id, SeriesMeta())
        store.write_series(series_id, f, meta, state={"source": "sample"})
        return {"series_id": series_id, "rows": int(len(f)), "source": "sample",
                "last_timestamp": f["timestamp"].max().isoformat()}
    cfg, secrets = connection_overrides(cfg, conn)
    if cfg.prometheus is None:
        raise JobError(f"series {series_id!r}: no Prometheus to ingest from: the Airflow Connection "
                       f"{PROMETHEUS_CONN_ID!r} is not defined and the config has no prometheus: section; define "
                       "one, or set `source: sample` in the config to use the embedded demo data")
    res = ingest_one(cfg, series_id, store, secrets)
    last = store.last_timestamp(series_id)
    return {"series_id": series_id, "source": "prometheus", **res,
            "last_timestamp": last.isoformat() if last is not None else None}


def record_ingest(config_path, logical_date, results: list[dict] | None, expected: list[str]) -> dict:
    """Write ``ingest/<ld>.json``: which series were refreshed and which failed."""
    cfg = _cfg(config_path)
    ok = sorted({r["series_id"] for r in (results or []) if r})
    doc = {"logical_date": ld_key(logical_date), "ok": ok, "missing": sorted(set(expected) - set(ok)),
           "results": [r for r in (results or []) if r]}
    atomic.write_text(_store(cfg).root / "ingest" / f"{doc['logical_date']}.json", jsonout.dumps(doc, indent=2) + "\n")
    return doc


# -- forecasts ------------------------------------------------------------------------
def forecast_series(config_path, tier: str, series_id: str, logical_date, seed: int = 0) -> dict:
    """Fit one tier on one stored series (:func:`capplan.run.stages.forecast.tier_forecasts`) and
    write its forecasts for ``logical_date`` (:meth:`capplan.store.local.Store.write_tier_forecast`).

    Raises InputError when the series is not in the store (its ingest failed).
    """
    if tier not in PLAN_TIERS:
        raise JobError(f"tier {tier!r}: not one of {PLAN_TIERS}")
    cfg = _cfg(config_path)
    store = _store(cfg)
    try:
        frame, meta, _ = store.read_series(series_id)  # this series only, not the whole store
    except KeyError:
        raise InputError(f"series {series_id!r}: no history in {store.history_dir} (did its ingest fail?)") from None
    if frame.empty:
        raise InputError(f"series {series_id!r}: empty history in {store.history_dir}")
    loaded = LoadedHistory(frame, {series_id: meta}, [], label=f"store:{store.root}")
    ledger = Ledger()
    prep = prepare(loaded, cfg, ledger)
    r = tier_forecasts(prep, cfg, tier, seed, cache_root=str(store.root))  # unchanged refit blocks reused
    h = prep.h5["timestamp"]
    doc = {"series_id": series_id, "tier": tier, "logical_date": ld_key(logical_date), "seed": seed,
           "issued_at": r.final["issued_at"].max().isoformat() if len(r.final) else None,
           "data_range": [h.min().isoformat(), h.max().isoformat()], "rows": int(len(r.final)),
           "backtest_rows": int(len(r.rolling)),
           "fallbacks": r.fallbacks.get(series_id, []) + ledger.notes(series_id),
           "warnings": r.warnings.get(series_id, []), "versions": versions()}
    store.write_tier_forecast(tier, ld_key(logical_date), series_id, r.rolling, r.final, doc)
    return {"series_id": series_id, "tier": tier, "rows": doc["rows"], "issued_at": doc["issued_at"]}


def record_forecasts(config_path, tier: str, logical_date, results: list[dict] | None, expected: list[str]) -> dict:
    """After a tier's mapped tasks: write ``_manifest.json`` (series ok / missing)
    and point ``forecasts/<tier>/LATEST`` at this logical date
    (:meth:`capplan.store.local.Store.record_forecasts`). Files of a series whose task did
    not succeed in this run are removed, so the folder holds exactly the manifest's set.
    """
    ok = [r["series_id"] for r in (results or []) if r]
    return _store(_cfg(config_path)).record_forecasts(tier, ld_key(logical_date), ok, expected)


def stored_tier_results(store, ledger, latest: dict[str, tuple[str, dict]], series: list[str]) -> dict:
    """Each tier's forecasts of ``series`` from its latest stored run, as
    :class:`capplan.run.state.TierResult` (fallbacks already in the ``ledger``'s notes dropped)."""
    out = {}
    for tier in PLAN_TIERS:
        rolling, finals, fallbacks, warnings = [], [], {}, {}
        for s in series:
            r, f, doc = store.read_tier_forecast(tier, latest[tier][0], s)
            rolling.append(r)
            finals.append(f)
            fb = [m for m in dict.fromkeys(doc.get("fallbacks", [])) if m not in ledger.notes(s)]
            if fb:
                fallbacks[s] = fb
            warnings[s] = list(doc.get("warnings", []))
        out[tier] = TierResult(tier, pd.concat(rolling, ignore_index=True), pd.concat(finals, ignore_index=True),
                               fallbacks, warnings)
    return out


# -- plan -----------------------------------------------------------------------------
def plan(config_path, logical_date, seed: int = 0) -> dict:
    """Combine each tier's latest forecasts, search policies, write and check
    manifests: the output folder ``<store>/plans/<ld>/`` (swapped in whole) and
    the store run ``airflow-<ld>-s<seed>`` (marked LATEST). The stages are
    :data:`capplan.run.pipeline.PLAN`, as in ``capplan plan``, with the tiers' forecasts taken
    from their stored runs (:func:`stored_tier_results`).

    Rolling-origin blocks and searches whose inputs did not change since an
    earlier run are taken from the store's cache (:mod:`capplan.run.cache`; the
    report's ``reused`` says which), so an hourly run redoes only what new data
    touched.

    A configured series without history or without a forecast of some tier in
    that tier's latest run is left out and listed in ``report.json`` under
    ``missing`` with the reason; one that fails in its own task is listed under
    ``failed`` and the rest is planned. The per-series work runs on the
    config's ``plan.executor`` (e.g. a Dask cluster). Returns a summary dict.

    Raises JobError when a tier has never run, no series is left to plan, or
    the manifests fail their checks (the store run is then not replaced).
    """
    cfg = _cfg(config_path)
    store = _store(cfg)
    key = ld_key(logical_date)
    expected = series_ids(config_path)
    stored = set(store.series_ids())
    latest = {}
    for tier in PLAN_TIERS:
        lf = store.latest_forecasts(tier)
        if lf is None:
            raise JobError(f"no {tier} forecasts in {store.root}/forecasts/{tier}: run capplan_forecast_{tier} first")
        latest[tier] = lf
    missing = missing_series(expected, stored, latest)
    todo = [s for s in expected if s not in missing]
    if not todo:
        raise JobError(f"nothing to plan: every series is missing: {missing}")

    t0 = dt.datetime.now(dt.timezone.utc)
    run_id = f"airflow-{key}-s{seed}"
    out = store.root / "plans" / key
    run_info = RunInfo(run_id=run_id, seed=seed, logical_date=key, started_at=t0.isoformat(), source="store",
                       forecast_runs={t: latest[t][0] for t in PLAN_TIERS}, versions=versions(),
                       coverage_target=cfg.plan.coverage_target, n_calls=cfg.plan.n_calls,
                       prices=price_book_used(cfg))
    # the tiers come from their forecast jobs; the benchmarks are cheap: computed here, then combined
    # exactly as `capplan plan` does
    state = PlanState(cfg, "store", todo, seed, cache_root=str(store.root), out=out, run=run_info, missing=missing,
                      stored=lambda st: stored_tier_results(store, st.ledger, latest, todo))
    report = pipeline.run(pipeline.PLAN, state).report
    problems = check_manifests(out, cfg.export)
    if problems:
        raise JobError(f"manifests in {out} failed checks: {problems}")
    store.save_run(out, run_id)
    prune(store.root)
    store.prune_runs(cfg.retention)
    return {"run_id": run_id, "out": str(out), "planned": sorted(report.series), "missing": missing,
            "failed": {s: f.error for s, f in report.failed.items()}, "files": report.run.files}


def missing_series(expected: list[str], stored: set[str], latest: dict[str, tuple[str, dict]]) -> dict[str, str]:
    """Series the plan must leave out, with the reason: no history in the store,
    or no forecast of some tier in that tier's latest run (its task failed)."""
    missing = {}
    for sid in expected:
        if sid not in stored:
            missing[sid] = "no history in the store (ingest failed)"
            continue
        gone = [t for t in PLAN_TIERS if sid not in latest[t][1]["ok"]]
        if gone:
            missing[sid] = "no forecast from tier " + ", ".join(f"{t} (run {latest[t][0]})" for t in gone)
    return missing


def check_manifests(out: Path, settings=None) -> list[str]:
    """Every problem in the files of the output folder ``out``, one line each
    (``file: path: [rule] message``), from :func:`capplan.report.validation.validate_folder`
    (the same checks as ``capplan export --validate``); ``settings`` is the
    config's ``export:`` section."""
    if not Path(out).is_dir():
        return []
    return [str(p) for p in validate_folder(out, settings)]
