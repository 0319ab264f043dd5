"""Options and data loading shared by every benchmark, so each is spelled one way.

A benchmark builds its parser with :func:`parser` and adds the shared options it
takes (:func:`add_source`, :func:`add_series`, :func:`add_seed`, :func:`add_seeds`,
:func:`add_forecasts`, :func:`add_config`), then loads data with
:func:`load_history` or :func:`forecasts_from`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from capplan.state import Forecasts
from capplan.sources import load_source

REPO = Path(__file__).resolve().parents[1]


def parser(doc: str | None, prog: str) -> argparse.ArgumentParser:
    """An argument parser for benchmark ``prog`` described by the first line of its docstring ``doc``."""
    return argparse.ArgumentParser(prog=f"python -m benchmarks {prog}",
                                   description=(doc or prog).strip().splitlines()[0])


def add_source(ap: argparse.ArgumentParser) -> None:
    """``--source`` (a capplan source: ``sample``, ``csv:PATH``, ``parquet:PATH``) and ``--timezone``
    (the IANA zone of naive timestamps in csv/parquet input), as ``capplan plan`` takes them."""
    ap.add_argument("--source", default="sample",
                    help="sample (default), csv:PATH or parquet:PATH, e.g. unseen traces for an honest check")
    ap.add_argument("--timezone", default="UTC", help="zone of naive timestamps in csv/parquet input")


def add_series(ap: argparse.ArgumentParser, help: str = "only these series ids (default: every series)") -> None:
    """``--series ID [ID ...]``, also repeatable (``--series a --series b``); ``None`` when not given."""
    ap.add_argument("--series", nargs="+", action="extend", default=None, metavar="ID", help=help)


def add_seed(ap: argparse.ArgumentParser) -> None:
    """``--seed N`` (default 0)."""
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def add_seeds(ap: argparse.ArgumentParser, default: list[int]) -> None:
    """``--seeds N [N ...]``: the run is repeated per seed."""
    ap.add_argument("--seeds", type=int, nargs="+", default=default, metavar="N",
                    help=f"seeds to repeat the run with (default {' '.join(map(str, default))})")


def add_forecasts(ap: argparse.ArgumentParser, required: bool = False) -> None:
    """``--forecasts OUT_DIR``: a ``capplan plan`` output folder whose ``backtest.parquet`` is reused."""
    ap.add_argument("--forecasts", type=Path, default=None, required=required, metavar="OUT_DIR",
                    help="a capplan plan output folder of the same source whose forecasts are reused")


def add_config(ap: argparse.ArgumentParser) -> None:
    """``--config capplan.yaml``: plan and forecast settings (default: the defaults)."""
    ap.add_argument("--config", default=None, help="a capplan.yaml whose settings this run uses "
                    "(default: the defaults); pass the one the --forecasts plan was made with")


def load_history(source: str = "sample", timezone: str = "UTC", series: list[str] | None = None):
    """The raw history of ``source`` as :func:`capplan.sources.load_source` returns it
    (``.frame``: ``series_id, timestamp, value`` in UTC; ``.meta``: series metadata), limited to
    ``series`` (the source's other series are dropped, so use the pipeline's load stage where the
    fleet matters, e.g. the global LSTM).

    Exits with a message naming the ids when ``series`` names an id the source lacks.
    """
    loaded = load_source(source, timezone=timezone)
    if series:
        missing = sorted(set(series) - set(loaded.frame["series_id"].unique()))
        if missing:
            sys.exit(f"--series: {', '.join(missing)} not in --source {source}")
        loaded.frame = loaded.frame[loaded.frame["series_id"].isin(series)].reset_index(drop=True)
        loaded.meta = {sid: m for sid, m in loaded.meta.items() if sid in series}
    return loaded


def forecasts_from(out_dir: Path) -> Forecasts:
    """The combined rolling-origin forecasts of a ``capplan plan`` output folder (``backtest.parquet``,
    rows of tier ``combined``: ``series_id, tier, issued_at, timestamp, p50, p90, p95, p99``), all that
    the search stage reads.

    Exits with a message when the folder has no ``backtest.parquet``.
    """
    path = Path(out_dir) / "backtest.parquet"
    if not path.is_file():
        sys.exit(f"--forecasts {out_dir}: no backtest.parquet; pass a capplan plan output folder")
    b = pd.read_parquet(path)
    return Forecasts({"combined": b[b["tier"] == "combined"].reset_index(drop=True)}, pd.DataFrame(), {}, {}, {})
