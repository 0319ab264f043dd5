"""``capplan backtest``: rolling-origin scores per series, horizon and model; with ``--policies``
the walk-forward policy backtest (:mod:`capplan.backtest.walk_forward`, views in :mod:`capplan.report.policy_table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from capplan.backtest.walk_forward import run_policy_backtest
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
from capplan.cli.options import check_timezone
from capplan.config.settings import load_config
from capplan.errors import EXIT_PARTIAL, InputError
from capplan.report.policy_table import csv_rows as policy_csv_rows
from capplan.report.policy_table import print_tables
from capplan.run.pipeline import BACKTEST, run
from capplan.run.state import PlanState, no_progress
from forecasting.backtest import BEST_OF, summarise

MODELS = ("combined", "hourly", "daily", "weekly", "naive", "seasonal_naive", "level", "revert", "profile", "prophet",
          "naive_conformal", "autoets")
HORIZONS = ("1h", "24h", "7d")


def backtest_document(scores: dict, notes: list[str] | None = None) -> dict:
    """Reshape pipeline scores into ``{"series": {ID: {"horizons": {h: {model: {mase, smape,
    pinball, coverage_p95, idle_ratio_p95, n}}}}}, "summary": {h: ...}, "notes": [...]}``
    (plus :func:`forecasting.backtest.summarise` of the combination
    per horizon; ``notes`` e.g. a peer left out for a missing library)."""
    doc = {"series": {}, "notes": list(notes or [])}
    for sid, per_model in scores.items():
        hz = {}
        for h in HORIZONS:
            row = {m: per_model[m][h] for m in MODELS if m in per_model and h in per_model[m]}
            if row:
                hz[h] = row
        doc["series"][sid] = {"horizons": hz}
    doc["summary"] = summarise(scores)
    return doc


def run_backtest(source: str, cfg, series: list[str] | None = None, seed: int = 0, timezone: str = "UTC",
                 progress=None, keep: dict | None = None) -> dict:
    """Run :data:`capplan.run.pipeline.BACKTEST` (load, forecast with default Prophet, combine, the
    peers at the evaluation window's origins, scores) and return the :func:`backtest_document`,
    with each series' evaluation window, fallbacks and warnings (its ledger) and the members
    carrying the combination's weight per lead bucket. Used by ``capplan backtest`` and the
    ``python -m benchmarks accuracy``. With ``keep`` (a dict), ``keep["rolling"]`` receives every model's
    rolling forecast frame and ``keep["prep"]`` the prepared series (history and windows), for
    the benchmark's diagnostics. A series that fails on its own (no observed value, too short to
    split, a failed forecast) is left out and listed under ``failed`` (series_id -> stage,
    error), as in ``capplan plan``.

    Raises InputError (exit 2) for an unknown series, an unreadable source, or when every series failed.
    """
    state = PlanState(cfg, source, series, seed, timezone, progress or no_progress, extra_models=("prophet",),
                      record_scores=False)
    run(BACKTEST, state)
    prep, fc, ledger = state.prep, state.fc, state.ledger
    if keep is not None:
        keep.update(rolling=fc.rolling, prep=prep)
    doc = backtest_document(state.scores, state.run_notes)
    for sid in doc["series"]:
        doc["series"][sid]["evaluation_window"] = prep.windows[sid].as_list()
        doc["series"][sid]["fallbacks"] = ledger.notes(sid)
        doc["series"][sid]["warnings"] = ledger.warnings(sid)
        doc["series"][sid]["members"] = fc.combination.get(sid, {}).get("members", {})
    doc["failed"] = ledger.failed  # left out, as in `capplan plan` (exit code 3)
    return doc


def csv_rows(doc: dict) -> list[dict]:
    """One row per series, horizon and model."""
    return [{"series_id": sid, "horizon": h, "model": m, **v}
            for sid, s in doc["series"].items() for h, row in s["horizons"].items() for m, v in row.items()]


def render_table(doc: dict) -> Table:
    t = Table(title="capplan backtest — evaluation window, rolling origins (lower MASE/pinball is better)")
    for c in ("series", "horizon", "model", "MASE", "sMAPE %", "pinball", "coverage_p95", "idle_p95", "n"):
        t.add_column(c, justify="left" if c in ("series", "horizon", "model") else "right")
    for sid, s in doc["series"].items():
        for h, row in s["horizons"].items():
            best = min((v["mase"] for v in row.values() if v["mase"] == v["mase"]), default=None)
            for i, (m, v) in enumerate(row.items()):
                mark = "[bold green]" if v["mase"] == best else ""
                t.add_row(sid if i == 0 else "", h if i == 0 else "", m, f"{mark}{v['mase']:.3f}",
                          f"{v['smape']:.1f}", f"{v['pinball']:.3f}", f"{v['coverage_p95']:.3f}",
                          f"{v.get('idle_ratio_p95', float('nan')):.3f}", str(v["n"]))
    return t


def register(app: typer.Typer) -> None:
    @app.command("backtest")
    def backtest(
        source: str = typer.Option("sample", "--source", help="sample, csv:PATH, parquet:PATH or store."),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml (store, tier options)."),
        series: Optional[list[str]] = typer.Option(None, "--series", help=SERIES_HELP, metavar="ID[,ID...]",
                                                   show_default="all"),
        seed: int = typer.Option(0, "--seed", help="Seed for the LSTM and Prophet sampling (and the policy search "
                                 "with --policies)."),
        fmt: Format = typer.Option(Format.table, "--format", help=FORMAT_HELP.replace(
            "series and policy", "series, horizon and model; with --policies per series, week and policy")),
        output: Optional[Path] = typer.Option(None, "--output", help=OUTPUT_HELP, show_default="stdout"),
        timezone: str = typer.Option("UTC", "--timezone", help="Zone of naive timestamps in csv/parquet input."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
        policies: bool = typer.Option(False, "--policies", help="Backtest the policies instead, walking forward over "
                                      "every complete week: tune on the weeks up to k, replay the recommendation, "
                                      "the baseline and the peers on week k+1 (cost, coverage, idle ratio, regret)."),
        weeks: Optional[int] = typer.Option(None, "--weeks", help="With --policies: score only the last N weeks.",
                                            show_default="every complete week"),
        tune_weeks: Optional[int] = typer.Option(None, "--tune-weeks", help="With --policies: tune on the last N "
                                                 "weeks before each scored week (1: the plan's 7-day tuning window).",
                                                 show_default="every week before it"),
        n_calls: Optional[int] = typer.Option(None, "--n-calls", help="With --policies: policy evaluations per search.",
                                              show_default="30, or plan.n_calls of --config"),
    ):
        """Score every tier, the combination, naive, seasonal-naive (1 day), default Prophet and the peers (the
        naive-conformal rule; statsforecast AutoETS when the bench dependencies are installed, else a note says it is
        missing) at lead bands 1h, 24h and 7d: MASE, sMAPE, mean pinball loss (0.5/0.9/0.95/0.99) and coverage_p95 with
        the idle ratio of provisioning at p95, by rolling-origin evaluation with no look-ahead; then a summary per
        horizon across series.

        With --policies: per series and complete week, what the recommendation, the baseline and each peer would have
        cost, tuned on the weeks before it only; a series shorter than 7 days of training and two weeks is skipped with
        a note (docs/backtest.md). Exit code 3 when a series failed."""
        check_timezone(timezone)  # options first: before any import or read
        if not 0 <= seed < 2**32:
            raise InputError(f"--seed {seed}: must be between 0 and 2**32 - 1 (NumPy's and TensorFlow's range)")
        check_policy_options(policies, weeks, tune_weeks, n_calls)
        ids = split_ids(series)
        check_output_file(output, source, config)
        cfg = load_config(config)
        if n_calls is not None:
            cfg.plan.n_calls = n_calls
        if config is not None and source == "sample" and cfg.series and cfg.prometheus is not None:
            source = "store"
        if policies:
            with StageProgress(enabled=not quiet) as progress:
                pdoc = run_policy_backtest(source, cfg, ids, seed, timezone, progress, weeks, tune_weeks)
            render(fmt, pdoc, lambda: policy_csv_rows(pdoc), lambda c: print_tables(pdoc, c), out, output)
            exit_partial(pdoc["failed"], "scored")
            return
        with StageProgress(enabled=not quiet) as progress:
            doc = run_backtest(source, cfg, ids, seed, timezone, progress)

        def table(console) -> None:
            console.print(render_table(doc))
            for note in doc["notes"]:
                console.print(note)
            for sid, v in doc["series"].items():
                for w in v.get("warnings", []):
                    console.print(f"warning: {sid}: {w}", style="yellow", markup=False, highlight=False)
            empty = [sid for sid, v in doc["series"].items() if not v["horizons"]]
            if empty:
                console.print(f"no scores for {', '.join(empty)}: no observed demand in the evaluation window "
                              "(see each series' evaluation_window in --format json)")
            for h, sm in doc["summary"].items():
                rel = ", ".join(f"{m} {r:.2f}" for m, r in sm["geomean_relative_mase"].items())
                ratio = sm["median_ratio_to_best_peer"]
                nc = sm["median_idle_ratio_p95_naive_conformal"]
                console.print(f"{h}: combined best or tied on {sm['best_or_tied']}/{sm['series']} series; median "
                              f"MASE(combined)/best of {{{', '.join(BEST_OF)}}} "
                              f"{'n/a' if ratio is None else f'{ratio:.2f}'} (wins {sm['wins_vs_best_peer']}, "
                              f"losses {sm['losses_vs_best_peer']}); geometric mean of MASE(combined)/MASE(model): "
                              f"{rel}; coverage_p95 in [0.90, 0.98] on {sm['coverage_p95_in_090_098']}/{sm['series']} "
                              f"(median {sm['median_coverage_p95']:.3f}, range {sm['min_coverage_p95']:.3f}-"
                              f"{sm['max_coverage_p95']:.3f}); idle ratio at p95 {sm['median_idle_ratio_p95'] or 0:.3f}"
                              + ("" if nc is None else f" (naive-conformal rule {nc:.3f})"))

        render(fmt, doc, lambda: csv_rows(doc), table, out, output)
        exit_partial(doc["failed"], "scored")


def exit_partial(failed: dict, done: str) -> None:
    """Say which series failed (on stderr) and exit with :data:`EXIT_PARTIAL` when any did."""
    for sid, f in failed.items():
        typer.echo(f"failed {sid} ({f['stage']}): {f['error']}", err=True)
    if failed:
        typer.echo(f"{len(failed)} series failed and were left out (failed in --format json); the others "
                   f"were {done}. Exit code {EXIT_PARTIAL}.", err=True)
        raise typer.Exit(EXIT_PARTIAL)


def check_policy_options(policies: bool, weeks: int | None, tune_weeks: int | None, n_calls: int | None) -> None:
    """``--weeks``, ``--tune-weeks`` and ``--n-calls`` need ``--policies`` and a sane count (InputError)."""
    given = {"--weeks": weeks, "--tune-weeks": tune_weeks, "--n-calls": n_calls}
    for flag, v in given.items():
        if v is None:
            continue
        if not policies:
            raise InputError(f"{flag}: only with --policies (the walk-forward policy backtest)")
        low = 4 if flag == "--n-calls" else 1
        if v < low:
            raise InputError(f"{flag} {v}: must be at least {low}")
