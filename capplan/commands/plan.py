"""``capplan plan``: the whole pipeline, from history to manifests."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from capplan.config import load_config
from capplan.console import StageProgress, out
from capplan.errors import InputError
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
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
    ):
        """Forecast, tune and export: writes policy.yaml, manifests/, forecasts.parquet and report.json.

        Every figure is computed on an evaluation window the search never saw, next to the seeds'
        rules of thumb (training reserve = request x 1.2, inference reserve = peak x 1.5, scale at 70 %/30 %).
        """
        from capplan.pipeline import run_plan
        from capplan.store import Store

        cfg = load_config(config)
        if n_calls is not None:
            if n_calls < 4:
                raise InputError("--n-calls: must be at least 4")
            cfg.plan.n_calls = n_calls
        if config is not None and source == "sample" and cfg.series and cfg.prometheus is not None:
            source = "store"
        progress = StageProgress(enabled=not quiet)
        report = run_plan(source, cfg, out_dir, series=series, seed=seed, timezone=timezone, progress=progress,
                          store=Store(cfg.store))
        if fmt is Format.json:
            typer.echo(report.to_json())
        else:
            out.print(render_table(report))
            for sid, s in report.series.items():
                for w in s.warnings:
                    if w.startswith("policy:"):
                        out.print(f"[yellow]warning[/yellow] {sid}: {w}", highlight=False)
            out.print(f"wrote {out_dir}/ ({len(report.run.files)} files) in {report.run.duration_s:.0f} s")
