"""``capplan ingest``: pull the config's series from Prometheus into the local store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.table import Table

from capplan.cli.commands.output import (
    FORMAT_HELP,
    OUTPUT_HELP,
    SERIES_HELP,
    Format,
    check_output_file,
    render,
    split_ids,
)
from capplan.cli.console import StageProgress, out
from capplan.config.prometheus import PrometheusConfig
from capplan.config.settings import CapplanConfig, load_config
from capplan.config.yaml_bounds import describe
from capplan.errors import InputError
from capplan.sources.prometheus import ingest as run_ingest
from capplan.store.local import Store


def render_table(results) -> Table:
    """One row per series: status, points pulled, points stored, stored range, time."""
    t = Table(title="capplan ingest (times UTC)")
    nums = ("new points", "idle steps (0)", "missing steps", "stored points", "seconds")
    for col in ("series", "status", "new points", "idle steps (0)", "missing steps", "stored points", "first", "last",
                "seconds"):
        t.add_column(col, justify="right" if col in nums else "left", no_wrap=col in ("series", "first", "last"))

    def short(iso):
        return iso[:16].replace("T", " ") if iso else ""

    for r in results:
        t.add_row(r.series_id, r.status, f"{r.new_points:,}", f"{r.idle_steps:,}", f"{r.missing_steps:,}",
                  f"{r.total_points:,}", short(r.first), short(r.last), f"{r.seconds:.1f}")
    return t


def with_prometheus_url(cfg: CapplanConfig, url: str | None) -> CapplanConfig:
    """``cfg`` with ``prometheus.url`` set to ``url`` (``--prometheus-url``), keeping the rest
    of ``prometheus:``, or adding ``prometheus: {url}`` when the config has none. The URL is
    checked as ``prometheus.url`` is (no credentials in it). Raises InputError for a bad URL."""
    if not url:
        return cfg
    base = cfg.prometheus.model_dump() if cfg.prometheus is not None else {}
    try:
        cfg.prometheus = PrometheusConfig.model_validate({**base, "url": url})
    except ValidationError as exc:  # the field's own message (pydantic's last line is only a link)
        raise InputError(f"--prometheus-url: {describe(exc.errors()[0], None)}") from None
    return cfg


def pull_first(cfg: CapplanConfig, ids: list[str] | None) -> None:
    """Ingest ``ids`` (all series when None) before a plan (``plan --prometheus-url``).
    Raises InputError when the config has no series or a pull failed (its message)."""
    if not cfg.series:
        raise InputError("--prometheus-url: the config has no `series:` to pull")
    failed = [r for r in run_ingest(cfg, Store(cfg.store), series_ids=ids) if r.exit_code]
    if failed:
        raise InputError("--prometheus-url: " + "; ".join(r.error or r.series_id for r in failed))


def register(app: typer.Typer) -> None:
    @app.command("ingest")
    def ingest(
        config: Path = typer.Option(..., "--config", help="capplan.yaml with `prometheus:` and `series:` "
                                    "(see the README)."),
        start: Optional[str] = typer.Option(None, "--start", help="ISO 8601 start (naive = UTC). Default: one step "
                                            "after the stored last timestamp, or prometheus.default_lookback (30d) "
                                            "ago."),
        end: Optional[str] = typer.Option(None, "--end", help="ISO 8601 end (naive = UTC). Default: now."),
        series: Optional[list[str]] = typer.Option(None, "--series", help=SERIES_HELP, metavar="ID[,ID...]",
                                                   show_default="all of the config"),
        fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_HELP.replace("series and policy", "series")),
        output: Optional[Path] = typer.Option(None, "--output", help=OUTPUT_HELP, show_default="stdout"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
        prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="Pull from this URL instead of "
                                                     "prometheus.url (a one-off run; credentials and headers as "
                                                     "configured)."),
    ):
        """Pull history from Prometheus into the store, resuming where the last pull ended.

        Each series' idle steps (stored as 0: exporter up, nothing requested) and missing steps
        (exporter down) are reported; a series that returned nothing after data existed is
        ``stopped``, with a warning on stderr.

        Exit codes: 0 every series pulled (or already up to date, or stopped); 2 bad input (config, a query
        Prometheus rejects, refused credentials, a query with no samples); 1 Prometheus unreachable
        or failing (5xx) after the retries. A failed series keeps its previously stored history.
        """
        ids = split_ids(series)
        check_output_file(output, config=config)
        cfg = with_prometheus_url(load_config(config), prometheus_url)
        if cfg.prometheus is None or not cfg.series:
            missing = "prometheus:" if cfg.prometheus is None else "series:"
            raise InputError(f"{config}: no `{missing}` section; `capplan ingest` needs `prometheus: {{url: ...}}` "
                             "and `series:` (see the README's Prometheus section)")
        progress = StageProgress(enabled=not quiet)

        def on_chunk(sid, i, n, pts):
            if n > 1 or i == n:
                progress("ingest", f"{sid}: chunk {i}/{n}, {pts:,} points")

        def on_series(r):
            if r.status == "failed" or r.status == "empty":
                progress("ingest", f"{r.series_id}: {r.status} (error below)")
            else:
                progress("ingest", f"{r.series_id}: {r.status}, {r.new_points:,} new points, "
                         f"{r.total_points:,} stored ({r.seconds:.1f} s)")
            for note in r.notes:
                progress("ingest", f"{r.series_id}: note: {note}")

        with progress:
            results = run_ingest(cfg, Store(cfg.store), start=start, end=end, series_ids=ids,
                                 on_chunk=on_chunk, on_series=on_series)
        doc = [r.as_dict() for r in results]
        render(fmt, doc, lambda: doc, lambda console: console.print(render_table(results)), out, output)
        failed = [r for r in results if r.exit_code]
        for r in results:
            if r.warning:
                typer.echo(f"warning: {r.warning}", err=True)
        for r in failed:
            typer.echo(f"error: {r.error}", err=True)
        code = 0 if not failed else (2 if all(r.exit_code == 2 for r in failed) else 1)
        if code:
            sys.exit(code)
