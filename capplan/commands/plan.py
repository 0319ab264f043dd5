"""``capplan plan``: the whole pipeline, from history to manifests."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from pydantic import ValidationError

from capplan.config import PlanConfig, load_config
from capplan.console import StageProgress, err, out
from capplan.errors import EXIT_PARTIAL, InputError
from capplan.executor import EXECUTORS
from capplan.report import Report


class Format(str, Enum):
    table = "table"
    json = "json"


def _pct(x):
    return "n/a" if x is None or x != x else f"{100 * x:.1f}%"


def render_table(report: Report) -> Table:
    """Per-series table: recommended vs baseline on the evaluation window (:class:`capplan.report.Report`)."""
    t = Table(title="capplan plan — evaluation window (never seen by the search)", show_lines=False)
    for col in ("series", "kind", "policy", "cost USD", "coverage", "idle ratio", "unmet", "saving", "notes"):
        t.add_column(col, justify="right" if col in ("cost USD", "coverage", "idle ratio", "unmet", "saving") else "left",
                     no_wrap=col in ("series", "policy"))
    for sid, s in report.series.items():
        r, b = s.recommended, s.baseline
        saving = (1 - r.cost_usd / b.cost_usd) if b.cost_usd else float("nan")
        unit = "GPU-h" if s.unit == "gpu" else "replica-h"
        t.add_row(sid, s.kind, "recommended", f"{r.cost_usd:,.0f}", _pct(r.coverage), _pct(r.idle_ratio),
                  f"{r.unmet:,.1f} {unit}", _pct(saving),
                  f"{len(s.fallbacks)} fallbacks" + ("; [yellow]see warnings[/yellow]" if any(
                      w.startswith("policy:") for w in s.warnings) else ""))
        t.add_row("", "", "baseline", f"{b.cost_usd:,.0f}", _pct(b.coverage), _pct(b.idle_ratio),
                  f"{b.unmet:,.1f} {unit}", "", "")
    return t


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan(
        source: str = typer.Option("sample", "--source", help="Where history comes from: 'sample' (embedded real "
                                   "traces), 'csv:PATH', 'parquet:PATH' (columns timestamp,series_id,value[,kind,unit]) "
                                   "or 'store' (what `capplan ingest` pulled; the default with --config)."),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml: Prometheus, series, prices, "
                                              "search bounds. See the README."),
        out_dir: Path = typer.Option(Path("capplan-out"), "--out", help="Output folder; replaced atomically at the end."),
        series: Optional[list[str]] = typer.Option(None, "--series", help="Plan only this series id (repeatable)."),
        seed: int = typer.Option(0, "--seed", help="Seed for the LSTM, Prophet sampling, spot draws and the search."),
        fmt: Format = typer.Option(Format.table, "--format", help="table (human) or json (the report on stdout)."),
        timezone: str = typer.Option("UTC", "--timezone", help="Zone of naive timestamps in csv/parquet input."),
        n_calls: Optional[int] = typer.Option(None, "--n-calls", help="Policy evaluations per search (default 30)."),
        executor: Optional[str] = typer.Option(
            None, "--executor", help="Where the per-series work runs (regularised series' ETS and Prophet fits, "
            "backtests, policy searches and replays): local (this process), processes (a pool on this machine; the "
            "default) or dask (a dask.distributed cluster). The global LSTM (daily tier) is not split: it trains "
            "once, in this process, on every series' windows. Default: plan.executor in the config."),
        scheduler: Optional[str] = typer.Option(
            None, "--scheduler", help="Dask scheduler address (tcp://HOST:8786) of an existing cluster; implies "
            "--executor dask. Without it, dask starts a LocalCluster of --workers processes."),
        workers: Optional[int] = typer.Option(None, "--workers", help="Worker processes for processes or the dask "
                                              "LocalCluster (default: up to 2)."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
    ):
        """Forecast, tune and export: writes policy.yaml, manifests/, forecasts.parquet and report.json.

        Every figure is computed on an evaluation window the search never saw, next to the seeds'
        rules of thumb (training reserve = request x 1.2, inference reserve = peak x 1.5, scale at 70 %/30 %).

        A series that raises in its own task is left out and listed under `failed` in report.json; the others
        are planned and the exit code is 3.
        """
        from capplan.pipeline import run_plan
        from capplan.store import Store

        cfg = load_config(config)
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
        if config is not None and source == "sample" and cfg.series and cfg.prometheus is not None:
            source = "store"
        progress = StageProgress(enabled=not quiet)
        report = run_plan(source, cfg, out_dir, series=series, seed=seed, timezone=timezone, progress=progress,
                          store=Store(cfg.store))
        for sid, f in report.failed.items():
            err.print(f"[red]failed[/red] {sid} ({f.stage}): {f.error}", highlight=False)
        if fmt is Format.json:
            typer.echo(report.to_json())
        else:
            out.print(render_table(report))
            for sid, s in report.series.items():
                for w in s.warnings:
                    if w.startswith("policy:"):
                        out.print(f"[yellow]warning[/yellow] {sid}: {w}", highlight=False)
            out.print(f"wrote {out_dir}/ ({len(report.run.files)} files) in {report.run.duration_s:.0f} s")
        if report.failed:
            err.print(f"{len(report.failed)} series failed and were left out (report.json: failed); the others "
                      f"were planned. Exit code {EXIT_PARTIAL}.", highlight=False)
            raise typer.Exit(EXIT_PARTIAL)
