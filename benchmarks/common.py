"""Options and data loading shared by every benchmark, so each is spelled one way.

A benchmark builds its parser with :func:`parser` and adds the shared options it
takes (:func:`add_source`, :func:`add_series`, :func:`add_seed`, :func:`add_seeds`,
:func:`add_forecasts`, :func:`add_config`), then loads data with
:func:`load_history` or :func:`forecasts_from`.

The plan's own stages (:data:`capplan.run.pipeline.PLAN`) are run on a
:class:`capplan.run.state.PlanState` through :func:`capplan.run.pipeline.run`, a few at a time:
:func:`loaded_state` / :func:`prepared_state` (the load stage, or its preparation of an
in-memory history), :func:`with_forecasts` (the forecast and combine stages, or a plan
folder's forecasts) and :func:`search_outcomes` (the search stage for one seed).
:func:`stage_meter` times the stages of any run and records the peak RSS after each.
"""

from __future__ import annotations

import argparse
import functools
import resource
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.run import pipeline
from capplan.run.stages.combine import combine
from capplan.run.stages.forecast import forecast
from capplan.run.stages.load import load, prepare
from capplan.run.stages.search import search
from capplan.run.state import Forecasts, PlanState
from capplan.sources import LoadedHistory, load_source
from optimizer.search.tuning import SearchOutcome

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
    return combined_only(b[b["tier"] == "combined"].reset_index(drop=True))


def combined_only(rolling: pd.DataFrame) -> Forecasts:
    """:class:`capplan.run.state.Forecasts` holding only the combined rolling-origin forecasts ``rolling``
    (``series_id, issued_at, timestamp, p50, p90, p95, p99``, 5-minute grid): all that the search
    stage reads; no plan forecast, no per-tier frames."""
    return Forecasts({"combined": rolling}, pd.DataFrame(), {}, {}, {})


def loaded_state(cfg: CapplanConfig, source: str = "sample", series: list[str] | None = None,
                 timezone: str = "UTC", seed: int = 0) -> PlanState:
    """A :class:`capplan.run.state.PlanState` after the load stage (:func:`capplan.run.stages.load.load`):
    ``loaded`` and ``prep`` set (``prep.h5`` / ``prep.h1``: ``series_id, timestamp, value`` in GPUs on
    the 5-minute / hourly grid; ``prep.windows``: training | tuning | evaluation per series), as
    ``capplan plan --source SOURCE --series ... --timezone ...`` would have them.

    Raises :class:`capplan.errors.InputError` for an unknown ``series`` id or an unusable source.
    """
    return pipeline.run([load], PlanState(cfg, source, series, seed, timezone))


def prepared_state(cfg: CapplanConfig, loaded: LoadedHistory, seed: int = 0) -> PlanState:
    """A :class:`capplan.run.state.PlanState` as the load stage leaves it, for a history built in memory
    (``loaded.frame``: ``series_id, timestamp, value``; ``loaded.meta``: each series' metadata):
    ``prep`` from :func:`capplan.run.stages.load.prepare`, its notes and failures in ``ledger``.

    Raises :class:`capplan.errors.InputError` as :func:`~capplan.run.stages.load.prepare` does.
    """
    state = PlanState(cfg, loaded.label or "memory", seed=seed, loaded=loaded)
    state.prep = prepare(loaded, cfg, state.ledger)
    return state


def with_forecasts(state: PlanState, out_dir: Path | None = None) -> PlanState:
    """``state`` (after the load stage) with ``fc`` set: the forecast and combine stages
    (``pipeline.run([forecast, combine], state)``, seeded with ``state.seed``; several minutes on
    the sample), or, with ``out_dir``, the combined forecasts of that ``capplan plan`` folder
    (:func:`forecasts_from`). Returns ``state``.

    Exits with a message naming them when ``out_dir`` lacks forecasts for some of ``state``'s series.
    """
    if out_dir is None:
        return pipeline.run([forecast, combine], state)
    state.fc = forecasts_from(out_dir)
    missing = sorted(set(state.prep.windows) - set(state.fc.rolling["combined"]["series_id"].unique()))
    if missing:
        sys.exit(f"--forecasts {out_dir}: no forecasts for {', '.join(missing)}; plan them first")
    return state


def cold_forecasts(cfg: CapplanConfig, source: str = "sample", series: list[str] | None = None,
                   timezone: str = "UTC", seed: int = 0) -> PlanState:
    """The load, forecast and combine stages (:func:`loaded_state`, :func:`with_forecasts`) seeded with
    ``seed``, on a fresh store and model registry (temporary folders, removed afterwards), so nothing is
    reused from an earlier run's cache or registry: every model is fitted with ``seed`` (the LSTM's
    initial weights and window sampling, Prophet's sampling, the hourly ETS's simulation). ``cfg`` is
    not changed; the state's ``cfg`` is ``cfg``. Several minutes per call on the sample.

    Raises as :func:`loaded_state` and the forecast stage do.
    """
    cold = cfg.model_copy(deep=True)
    with tempfile.TemporaryDirectory() as d:
        cold.store, cold.models = str(Path(d) / "store"), str(Path(d) / "models")
        state = with_forecasts(loaded_state(cold, source, series, timezone, seed))
    state.cfg = cfg
    return state


def search_outcomes(state: PlanState, seed: int) -> dict[str, SearchOutcome]:
    """The search stage (``pipeline.run([search], state)``) on ``state``'s forecasts with ``seed``:
    series_id -> :class:`optimizer.search.tuning.SearchOutcome` (regret, coverage, idle ratio and cost in
    USD of each policy on the evaluation window). ``state.seed`` is left at ``seed``.

    Raises :class:`capplan.errors.InputError` when every series' search failed.
    """
    state.seed = seed
    return pipeline.run([search], state).outcomes


def peak_rss_mib(children: bool = False) -> float:
    """High-water resident memory (MiB, ``resource.getrusage``) of this process, plus that of its
    finished child processes with ``children`` (e.g. a process-pool executor's workers). It only grows."""
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if children:
        kb += resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return kb / 1024.0


@contextmanager
def stage_meter(stages: list, children: bool = False):
    """Time the entries of ``stages`` (e.g. :data:`capplan.run.pipeline.PLAN`) while the block runs:
    each is wrapped in place (its ``__name__`` kept, so ``run.stage_seconds`` names it as before)
    and restored on exit. Yields a dict filled as stages end: stage name -> ``{"s": wall seconds,
    "peak_mib": peak RSS after the stage}`` (:func:`peak_rss_mib` with ``children``)."""
    rows: dict[str, dict] = {}
    original = list(stages)

    def metered(fn):
        @functools.wraps(fn)
        def inner(state):
            t = time.perf_counter()
            try:
                return fn(state)
            finally:
                rows[fn.__name__] = {"s": round(time.perf_counter() - t, 2), "peak_mib": round(peak_rss_mib(children))}
        return inner

    stages[:] = [metered(fn) for fn in original]
    try:
        yield rows
    finally:
        stages[:] = original
