"""``capplan plan``: the whole pipeline, from history to manifests.

The table has one row per series and policy (recommended, baseline, and any
other policy the report carries, e.g. peers), so new policies add rows, not
width. Columns that do not fit the terminal are dropped in a fixed order
(mix, regret, kind, unmet, idle ratio, saving; the ``drop`` ranks of
:data:`COLUMNS`, :data:`EXTRA_COLUMNS` and :data:`MIX_COLUMN`) and named under the
table; numbers are never cut. Under the table: the fleet summary
(:mod:`capplan.report.summary`), the fleet's purchase mix (:mod:`capplan.report.mix_shares`),
the notes grouped and ordered by what to act on (:mod:`capplan.report.notes`), what was
written, and the store and model folder used. ``--quick`` applies
:data:`capplan.config.quick.QUICK` and says so before and after the table.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.console import Console

from capplan.cli.commands.ingest import pull_first, with_prometheus_url
from capplan.cli.commands.output import (
    FORMAT_HELP,
    OUTPUT_HELP,
    SERIES_HELP,
    Format,
    check_out_dir,
    check_output_file,
    check_subset_overwrite,
    render,
    split_ids,
)
from capplan.cli.console import StageProgress, err, out
from capplan.cli.fleet_table import print_fleet
from capplan.cli.options import check_timezone
from capplan.cli.table import Column, fit_table
from capplan.config.quick import apply_quick
from capplan.config.settings import PlanConfig, load_config
from capplan.errors import EXIT_PARTIAL, InputError
from capplan.report.assumptions import assumption_lines
from capplan.report.mix_shares import csv_fields, mix_of, short
from capplan.report.model import Report, SeriesReport
from capplan.report.notes import RANKS, Note, fold_informational, group_notes, rank, series_notes
from capplan.report.summary import fleet_summary, quota_note, summary_lines
from capplan.report.validation import checked_file_count
from capplan.run.executor import EXECUTORS
from capplan.run.pipeline import run_plan
from capplan.run.stages.load import store_location, store_option
from capplan.store.local import Store

#: policies left out of the table (still in json/yaml/csv and the summary)
TABLE_SKIP = ("random_search",)
COLUMNS = [Column("series", min_width=10), Column("policy", min_width=8), Column("kind", drop=5),
           Column("cost USD", numeric=True), Column("coverage", numeric=True),
           Column("idle ratio", numeric=True, drop=3),
           Column("unmet", numeric=True, drop=4), Column("saving", numeric=True, drop=2)]
#: extra numeric columns shown when some policy's metrics carry the key: (metrics key, column, format)
QUICK_NOTE = ("quick run (--quick): a smaller search and forecast on shorter windows; these figures are for a first "
              "look, plan without --quick before buying or deploying")
#: note lines under the table before informational notes are folded (capplan.report.notes.fold_informational)
NOTE_BUDGET = 15
EXTRA_COLUMNS = [("regret", Column("regret", numeric=True, drop=6), "{:.2f}")]
#: what the columns mean, printed under the table
LEGEND = ("(coverage: share of intervals with capacity >= demand; idle ratio: unused share of the capacity; unmet: "
          "demand not served, GPU-hours or replica-hours; regret: cost / the perfect-foresight cost of the window, "
          "below 1 only for a policy that left demand unmet; saving: against the baseline, the rules of thumb)")
#: reserved/spot/on-demand percent of GPU-hours, shown when some policy recorded its purchase mix
MIX_COLUMN = Column("mix % R/S/D", numeric=True, drop=7)

FAILED_SHOWN = 50
"""Failed series printed one a line on stderr; more are counted by cause (report.json lists each)."""


def _pct(x):
    return "n/a" if x is None or x != x else f"{100 * x:.1f}%"


def _unit(s: SeriesReport) -> str:
    return "GPU-h" if s.unit == "gpu" else "replica-h"


def _mix(doc: dict | None, sid: str, name: str, m) -> dict | None:
    """The purchase mix of policy ``name`` of series ``sid``: from the typed metrics ``m``
    when they carry it, else from the plain document ``doc`` (report.json's shape)."""
    mix = mix_of(m)
    if mix is None and doc:
        s = (doc.get("series") or {}).get(sid) or {}
        mix = mix_of(s.get(name) if name in s else (s.get("peers") or {}).get(name))
    return mix


def _saving(m, base: float | None) -> tuple[float | None, float | None]:
    """(USD saved against the baseline, that as a ratio of the baseline's cost)."""
    if m.cost_usd is None or base is None:
        return None, None
    return base - m.cost_usd, ((base - m.cost_usd) / base if base else None)


def shown_policies(s: SeriesReport) -> dict:
    """The rows of one series: :meth:`capplan.report.model.SeriesReport.policies` with ``recommended`` the
    figures of what the exported objects allow (:meth:`~capplan.report.model.SeriesReport.exported`: held to
    the pool's quota when the Queue holds it there) and, for such a pool, ``quota_raised`` after it (the
    uncapped recommendation: what raising the quota to ``quota.need_gpus`` buys)."""
    out = {}
    for name, m in s.policies().items():
        if name == "recommended" and s.exported() is not m:
            out["recommended"], out["quota_raised"] = s.exported(), m
        else:
            out[name] = m
    return out


def _label(s: SeriesReport, name: str) -> str:
    if name == "recommended":
        return f"recommended ({s.recommendation})"
    if name == "quota_raised":
        return f"quota raised to {s.quota.need_gpus}"
    return name.replace("_", " ")


def table_rows(report: Report, doc: dict | None = None) -> tuple[list[Column], list[list[str]]]:
    """Columns and cell strings of the plan table (one row per series and policy,
    :meth:`capplan.report.model.SeriesReport.policies`; costs USD, coverage and idle ratio as percent,
    unmet in GPU-hours or replica-hours; the purchase mix as reserved/spot/on-demand percent of
    GPU-hours, :mod:`capplan.report.mix_shares`, when some policy recorded one). ``doc``: the report as a
    plain document, read for fields the typed model does not carry."""
    extras = [(k, c, f) for k, c, f in EXTRA_COLUMNS
              if any(getattr(m, k) is not None for s in report.series.values() for m in s.policies().values())]
    mixes = {(sid, name): _mix(doc if name != "recommended" or s.exported() is s.recommended else None, sid, name, m)
             for sid, s in report.series.items() for name, m in shown_policies(s).items()}
    show_mix = any(v is not None for v in mixes.values())
    cols = COLUMNS + [c for _, c, _ in extras] + ([MIX_COLUMN] if show_mix else [])
    rows = []
    for sid, s in report.series.items():
        pols = shown_policies(s)
        base = pols["baseline"].cost_usd
        for i, name in enumerate(n for n in pols if n not in TABLE_SKIP):
            m = pols[name]
            saving = "" if name == "baseline" else _pct(_saving(m, base)[1]) if base else ""
            row = [sid if i == 0 else "", _label(s, name), s.kind if i == 0 else "",
                   f"{m.cost_usd:,.0f}" if m.cost_usd is not None else "n/a", _pct(m.coverage), _pct(m.idle_ratio),
                   f"{m.unmet:,.1f} {_unit(s)}" if m.unmet is not None else "", saving]
            row += [f.format(getattr(m, k)) if getattr(m, k) is not None else "" for k, _, f in extras]
            row += [short(mixes[sid, name])] if show_mix else []
            rows.append(row)
    return cols, rows


def _round(x, digits: int):
    return None if x is None or x != x else round(float(x), digits)


def csv_rows(report: Report, doc: dict | None = None) -> list[dict]:
    """One flat row per series and policy (every policy, units in the column names): costs
    and savings in USD to the cent, ratios (coverage, idle_ratio, saving_ratio, mix shares) to
    4 (shares 3) decimals, unmet to 0.01 GPU-hours or replica-hours, regret (cost / the
    perfect-foresight cost) to 3 decimals; the purchase mix per :func:`capplan.report.mix_shares.csv_fields`."""
    rows = []
    for sid, s in report.series.items():
        pols = shown_policies(s)
        base = pols["baseline"].cost_usd
        for name, m in pols.items():
            usd, ratio = _saving(m, base)
            rows.append({"series_id": sid, "kind": s.kind, "unit": s.unit, "policy": name,
                         "recommendation": s.recommendation,
                         "cost_usd": _round(m.cost_usd, 2), "saving_usd": _round(usd, 2),
                         "saving_ratio": _round(ratio, 4), "regret": _round(m.regret, 3),
                         "coverage": _round(m.coverage, 4), "idle_ratio": _round(m.idle_ratio, 4),
                         "unmet": _round(m.unmet, 2), "scale_events": m.scale_events,
                         **csv_fields(_mix(doc if name != "recommended" or s.exported() is s.recommended else None,
                                           sid, name, m)),
                         "fallbacks": len(s.fallbacks), "warnings": len(s.warnings)})
    return rows


def print_report(report: Report, console: Console, verbose: bool = False, doc: dict | None = None) -> None:
    """The table, what it leaves out, the fleet summary and purchase mix, and the notes of a
    :class:`capplan.report.model.Report` (``doc``: the same report as a plain document)."""
    cols, rows = table_rows(report, doc)
    t, dropped = fit_table("capplan plan — evaluation window (never seen by the search)", cols, rows, console.width)
    console.print(t)
    summary = report.summary or fleet_summary(report)
    for line in assumption_lines(summary.assumptions):  # first: the headline rests on them
        console.print(line, style="yellow", highlight=False, markup=False)
    if dropped:
        console.print(f"(not shown at {console.width} columns: {', '.join(dropped)}; see --format json, yaml or csv)",
                      highlight=False, markup=False)
    for line in summary_lines(summary):
        console.print(line, highlight=False, markup=False)
    console.print(LEGEND, highlight=False, markup=False)
    if any(c is MIX_COLUMN for c in cols):
        console.print("(mix % R/S/D: reserved/spot/on-demand percent of each policy's GPU-hours)", highlight=False,
                      markup=False)
    peers = sorted({s.recommendation for s in report.series.values() if s.recommendation not in ("rule", "searched")})
    if peers:
        console.print(f"(recommended ({', '.join(peers)}): the policy the exports carry, which expresses that peer "
                      "(optimizer.rivals.expressed); the peer's own row replays its rule as such)", highlight=False,
                      markup=False)
    print_fleet(report.fleet, console)  # only when the run has a fleet
    print_notes(report, console, verbose)


def print_notes(report: Report, console: Console, verbose: bool = False) -> None:
    """The run's notes under the table (:mod:`capplan.report.notes`): grouped across series and
    ordered by what to act on; ``verbose``: every note (forecast warnings included) per
    series, ungrouped."""
    rows = series_notes(report, verbose)
    kinds = {sid: s.kind for sid, s in report.series.items()}
    quota = quota_note(report.summary or fleet_summary(report))  # every pool above its quota: act on it
    first = [Note(quota, [], 0, True)] if quota else []
    if verbose:
        notes = first + [Note(text, [sid], rank(text, warning), warning) for sid, text, warning in rows]
        notes.sort(key=lambda n: n.rank)
        folded = False
    else:
        notes, folded = fold_informational(first + group_notes(rows), NOTE_BUDGET)
    for r, heading in RANKS.items():
        part = [n for n in notes if n.rank == r]
        if part:
            console.print(f"{heading} ({len(part)}):", style="yellow" if r == 0 else None, highlight=False)
            for n in part:
                console.print(f"  {n.line(kinds)}", highlight=False, markup=False)
    if folded or (not verbose and len(notes) < len(rows)):
        console.print(f"({len(rows)} notes in all; --verbose lists every note per series)", highlight=False,
                      markup=False)


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(
        source: str = typer.Option("sample", "--source", help="Where history comes from: 'sample' (embedded real "
                                   "traces), 'csv:PATH', 'parquet:PATH' (columns "
                                   "timestamp,series_id,value[,kind,unit]) or 'store' (what `capplan ingest` pulled; "
                                   "the default with --config)."),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml: Prometheus, series, prices, "
                                              "search bounds. See the README.", show_default="none"),
        out_dir: Path = typer.Option(Path("capplan-out"), "--out",
                                     help="Output folder; replaced atomically at the end. A --series run refuses "
                                     "to replace a plan of more series there (exit 2) unless --force."),
        force: bool = typer.Option(False, "--force", help="With --series: replace an --out folder that holds a "
                                   "plan of more series."),
        series: Optional[list[str]] = typer.Option(None, "--series", help=SERIES_HELP, metavar="ID[,ID...]",
                                                   show_default="all"),
        seed: int = typer.Option(0, "--seed", help="Seed for the LSTM, Prophet sampling and the search. Spot "
                                 "interruptions are drawn from one fixed scenario, so two seeds that reach the same "
                                 "plan report the same figures."),
        fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_HELP),
        output: Optional[Path] = typer.Option(None, "--output", help=OUTPUT_HELP, show_default="stdout"),
        timezone: str = typer.Option("UTC", "--timezone", help="Zone of naive timestamps in csv/parquet input."),
        n_calls: Optional[int] = typer.Option(None, "--n-calls", help="Policy evaluations per search.",
                                              show_default="30, or plan.n_calls of --config"),
        executor: Optional[str] = typer.Option(
            None, "--executor", help="Where the work runs: local (this process), processes (a pool on this "
            "machine) or dask (a dask.distributed cluster). Distributed, one task per series: the ETS, Prophet and "
            "naive fits and their rolling backtests, the combination and calibration, the backtest scores, the "
            "policy searches and replays. Not split: the global LSTM (daily tier) trains one network on every "
            "series' windows per rolling refit block and once for the plan, each fit one task with its predictions. "
            "In this process: loading, regularising, the capacity plans and writing the output.",
            show_default="plan.executor of --config, else processes"),
        scheduler: Optional[str] = typer.Option(
            None, "--scheduler", help="Dask scheduler address (tcp://HOST:8786) of an existing cluster; implies "
            "--executor dask. Without it, dask starts a LocalCluster of --workers processes.", show_default="none"),
        workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes for processes or the dask "
                                              "LocalCluster.", show_default="up to 2"),
        quick: bool = typer.Option(False, "--quick", help="A first look: a coarse grid scan with no Gaussian-process "
                                   "refinement or random search, 3-day tuning and evaluation windows, 2 LSTM epochs, "
                                   "400 LSTM windows and 60 Prophet samples (capplan.config.quick.QUICK). The "
                                   "figures are rougher and the output lists what was reduced; plan without it before "
                                   "acting on them."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Print every note per series, ungrouped, with "
                                     "the forecast warnings."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
        publish: Optional[bool] = typer.Option(None, "--publish/--no-publish", help="Make this run the store's "
                                               "LATEST (the fleet plan the dashboard opens on).",
                                               show_default="only a run of every series into the default --out"),
        reuse: bool = typer.Option(True, "--reuse/--no-reuse", help="Take rolling-origin forecasts, block fits and "
                                   "policy searches whose inputs did not change from the store's cache "
                                   "(capplan.run.cache; the report's `reused` says what). Same figures either way."),
        store: Optional[str] = typer.Option(None, "--store", help="Store folder or s3://, gs://, file:// URL: "
                                            "history, runs and the cache of this run (overrides the config's "
                                            "store:).", show_default="the config's store, else .capplan/store"),
        prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="With --config: pull the series "
                                                     "from this URL into the store first (a one-off run; "
                                                     "`capplan ingest`), then plan from the store."),
    ):
        """Forecast, tune and export: writes policy.yaml, crds/, manifests/, forecasts.parquet and report.json.

        Every figure is computed on an evaluation window the search never saw, next to the
        rules of thumb (training reserve = 1.2 x the last 24 h peak, 30 % reserved and the rest spot; inference = 1.5 x
        peak, scale at 70 %/30 %).

        A series that raises in its own task is left out and listed under `failed` in report.json; the others
        are planned and the exit code is 3.
        """
        check_timezone(timezone)  # options first: before any import or read
        if not 0 <= seed < 2**32:
            raise InputError(f"--seed {seed}: must be between 0 and 2**32 - 1 (NumPy's and TensorFlow's range)")
        ids = split_ids(series)
        check_out_dir(out_dir, source=source)
        check_subset_overwrite(out_dir, ids, force)
        check_output_file(output, source, config)
        cfg = with_prometheus_url(load_config(config), prometheus_url)
        if store is not None:
            cfg.store = store_option(store)
        if prometheus_url:
            pull_first(cfg, ids)
        if quick or cfg.plan.quick:
            apply_quick(cfg)
        if n_calls is not None:
            if n_calls < 4:
                raise InputError("--n-calls: must be at least 4")
            cfg.plan.n_calls = n_calls
        if executor is not None and executor not in EXECUTORS:
            raise InputError(f"--executor {executor}: use one of {', '.join(EXECUTORS)}")
        if workers is not None and workers < 1:
            raise InputError("--workers: must be at least 1")
        try:
            cfg.plan = PlanConfig.model_validate({**cfg.plan.model_dump(), **{k: v for k, v in {
                "executor": executor or ("dask" if scheduler else None), "scheduler": scheduler,
                "workers": workers}.items() if v is not None}})
        except ValidationError as exc:
            raise InputError(f"--executor/--scheduler: {exc.errors()[0]['msg']}") from None
        store_root = Path(cfg.store).resolve()
        if out_dir.resolve() == store_root or store_root in out_dir.resolve().parents:
            raise InputError(f"--out {out_dir}: is inside the store {cfg.store} (its runs and LATEST are capplan's "
                             "own); name a folder outside it")
        if config is not None and source == "sample" and cfg.series and cfg.prometheus is not None:
            source = "store"
        run_store = Store(cfg.store)
        run_store.check_writable()  # a read-only store is said now, not after the forecasts
        with StageProgress(enabled=not quiet) as progress:
            result = run_plan(source, cfg, out_dir, series=ids, seed=seed, timezone=timezone,
                              progress=progress, store=run_store, publish=publish, reuse=reuse)
        report = result.model_dump()  # capplan.report.model.Report as a plain document for every format

        where = store_location(cfg, config)
        reduced = [f"  reduced: {r}" for r in report["run"].get("quick_reductions", [])]
        if fmt is not Format.table and not quiet:
            for line in ([QUICK_NOTE] if cfg.plan.quick else []) + where + reduced:
                err.print(line, highlight=False, markup=False)

        def table(console: Console) -> None:
            if cfg.plan.quick:
                console.print(QUICK_NOTE, style="yellow", highlight=False, markup=False)
            print_report(result, console, verbose, report)
            size = report["run"].get("size_bytes")
            console.print(f"wrote {out_dir}/ ({len(report['run']['files'])} files, {checked_file_count(out_dir)} of "
                          "them YAML/JSON that `capplan export --validate` checks"
                          + (f", {size / 1e6:.1f} MB" if size else "") + ") in "
                          f"{report['run']['duration_s']:.0f} s", highlight=False, markup=False)
            if report["run"].get("run_id"):
                console.print(f"run {report['run']['run_id']}: " + (
                    "published as the store's LATEST" if report["run"].get("published") else
                    "saved in the store, not published (LATEST unchanged; --publish makes it the fleet plan)"),
                    highlight=False, markup=False)
            for line in where:
                console.print(line, highlight=False, markup=False)
            if cfg.plan.quick:
                console.print(QUICK_NOTE, style="yellow", highlight=False, markup=False)
            for line in reduced:
                console.print(line, highlight=False, markup=False)

        render(fmt, report, lambda: csv_rows(result, report), table, out, output)
        failed = report.get("failed") or {}
        for sid, f in list(failed.items())[:FAILED_SHOWN]:  # ids as text, never as console markup
            err.print(f"failed {sid} ({f['stage']}): {f['error']}", style="red", highlight=False, markup=False)
        if len(failed) > FAILED_SHOWN:  # thousands of short series: counted by cause, each in report.json
            why = Counter("too short" if "too short:" in f["error"] else f"failed in {f['stage']}"
                          for f in list(failed.values())[FAILED_SHOWN:])
            err.print(f"... and {len(failed) - FAILED_SHOWN} more: " + ", ".join(f"{n} {w}" for w, n in
                      why.most_common()) + " (report.json: failed lists each)", highlight=False, markup=False)
        if failed:
            err.print(f"{len(failed)} series failed and were left out (report.json: failed); the others "
                      f"were planned. Exit code {EXIT_PARTIAL}.", highlight=False)
            raise typer.Exit(EXIT_PARTIAL)
