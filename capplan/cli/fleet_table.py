"""The CLI's fleet table under the plan table: per GPU model and purchase option the GPUs (the most held at
once), GPU-hours and USD of the recommended fleet plan (``report.json``'s ``fleet``, :mod:`capplan.report.fleet`),
then the fleet's cost against each series alone, pooled without substitution and the limit. Printed only when the
report has a fleet."""

from __future__ import annotations

from rich.console import Console

from capplan.cli.table import Column, fit_table
from capplan.report.fleet import FleetReport

OPTIONS = {"reserved": "reserved (weekly)", "spot": "spot (daily)", "on_demand": "on-demand (hourly)"}


def fleet_rows(fleet: FleetReport) -> tuple[list[Column], list[list[str]]]:
    """Columns and cells: one row per GPU model and purchase option with anything bought, and a total row."""
    cols = [Column("GPU model"), Column("option"), Column("GPUs", numeric=True), Column("GPU-hours", numeric=True),
            Column("USD", numeric=True)]
    rows = []
    for model, opts in fleet.mix.items():
        for option, f in opts.items():
            if f.gpu_hours > 0:
                rows.append([model, OPTIONS.get(option, option), f"{f.gpus:,.0f}", f"{f.gpu_hours:,.0f}",
                             f"{f.cost_usd:,.0f}"])
    total_h = sum(f.gpu_hours for o in fleet.mix.values() for f in o.values())
    rows.append(["total", "", "", f"{total_h:,.0f}", f"{fleet.recommended.cost_usd:,.0f}"])
    return cols, rows


def fleet_lines(fleet: FleetReport) -> list[str]:
    """The comparison under the table: cost against alone, pooled and the limit, regret, violations, and the
    series under their target coverage (min(0.95, alone))."""
    rec, alone, pooled = fleet.recommended.cost_usd, fleet.alone.cost_usd, fleet.pooled.cost_usd
    lines = [f"fleet {fleet.name!r}: USD {rec:,.0f} against {alone:,.0f} with each series alone on its own model "
             f"({rec / alone:.2f}x) and {pooled:,.0f} pooled without substitution; perfect-foresight limit "
             f"{fleet.limit.cost_usd:,.0f} (fleet regret {fleet.regret:.2f}); "
             f"{fleet.violations} steps on a model outside a series' list or below its memory floor"
             if alone > 0 and pooled > 0 and fleet.regret is not None else
             f"fleet {fleet.name!r}: USD {rec:,.0f}"]
    low = [f"{sid} {s.coverage:.1%} (alone {s.alone_coverage:.1%})" for sid, s in fleet.series.items()
           if s.coverage < min(0.95, s.alone_coverage) - 1e-9]
    if low:
        lines.append("fleet coverage below min(95 %, alone): " + "; ".join(low))
    lines.extend(f"fleet: {n}" for n in fleet.notes)
    return lines


def print_fleet(fleet: FleetReport | None, console: Console) -> None:
    """The fleet table and its lines; nothing when ``fleet`` is None."""
    if fleet is None:
        return
    cols, rows = fleet_rows(fleet)
    t, _ = fit_table(f"fleet {fleet.name} — per GPU model and purchase option, {fleet.evaluation_window[0][:16]} to "
                     f"{fleet.evaluation_window[1][:16]} UTC", cols, rows, console.width)
    console.print(t)
    for line in fleet_lines(fleet):
        console.print(line, highlight=False, markup=False)
