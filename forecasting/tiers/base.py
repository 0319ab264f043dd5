"""The one interface every forecaster implements, and the tier registry.

A forecaster is fitted on a history frame (columns ``series_id, timestamp,
value`` on its own grid: 5 min for ``hourly``, 1 h for ``daily`` and
``weekly``) and then predicts quantiles at one or more *origins*. At an origin
``o`` it may use history up to and including ``o`` as context (e.g. ETS state,
LSTM input window) but never the values after it, and its parameters were
fitted only on data before the fit origin. This is what makes rolling-origin
evaluation honest (Hyndman & Athanasopoulos, *Forecasting: Principles and
Practice*, 3rd ed., §5.10 "Time series cross-validation").

Plug-ins register with :func:`register` and are built by name with
:func:`make`, the way krr chooses strategies by name.
"""

from __future__ import annotations

import json
import os
import zipfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict

from forecasting.plugins import Registry
from forecasting.registry import library_versions
from forecasting.types import FORECAST_COLUMNS, QCOLS, SeriesMeta, empty_forecast

#: Version of the ``forecaster.json`` layout written by :meth:`Forecaster.save`.
SAVE_FORMAT = 1
#: Libraries whose versions a saved model records (distribution names).
SAVED_LIBS = ("statsmodels", "prophet", "keras", "tensorflow-cpu", "tensorflow", "pandas", "numpy")


class ModelFileError(ValueError):
    """A saved model that cannot be used: missing or unreadable files, another tier,
    another architecture or target, another save format. Callers refit."""


Role = Literal["tier", "member", "benchmark"]
"""What a registered model is to the pipeline: a ``tier`` is combined and has its own plan
forecast in ``forecasts.parquet`` (hourly, daily, weekly); a ``member`` is combined only
(naive, the robust members); a ``benchmark`` is scored, never combined (default Prophet)."""

_REGISTRY: Registry[type["Forecaster"]] = Registry("forecaster")
_ROLES: dict[str, Role] = {}


def register(name: str, cls: type["Forecaster"], role: Role) -> None:
    """Make ``cls`` available as ``make(name)`` with ``role``; the registry's order is the
    combination's (:func:`names`). The lines that call it are :mod:`forecasting.tiers`."""
    cls.name = name
    _REGISTRY.register(name, cls)
    _ROLES[name] = role


def names(*roles: Role) -> tuple[str, ...]:
    """Registered names with one of ``roles`` (all without), in registration order."""
    return tuple(n for n in _REGISTRY if not roles or _ROLES[n] in roles)


def make(name: str, **kwargs) -> "Forecaster":
    """Build a registered forecaster by name.

    Raises
    ------
    KeyError: unknown name (the message lists the known ones).
    """
    return forecaster_class(name)(**kwargs)


def forecaster_class(name: str) -> type["Forecaster"]:
    """The registered class of ``name`` (its class-level facts: ``step``, ``refit_every``,
    ``per_series``, ``settings``) without building one. Raises KeyError for an unknown name."""
    return _REGISTRY[name]


def is_global(name: str) -> bool:
    """True for a model trained once on every series' windows (``per_series = False``, e.g. the
    LSTM), which the pipeline fits in tasks of its own and never splits per series."""
    return not forecaster_class(name).per_series


def available() -> list[str]:
    """Names of all registered forecasters."""
    return sorted(_REGISTRY)


class TierSettings(BaseModel):
    """A model's own constructor options, typed. A subclass declares each option as a field
    whose ``alias`` is its key in the ``forecast:`` section of ``capplan.yaml`` (e.g.
    ``epochs`` read from ``lstm_epochs``); other keys of the section are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    @classmethod
    def default(cls, name: str, value=None):
        """``value``, or the declared default of option ``name`` when ``value`` is None: a model's constructor takes
        its defaults from here, so each option's default is declared once."""
        return cls.model_fields[name].get_default(call_default_factory=True) if value is None else value

    def kwargs(self) -> dict:
        """The options as constructor keyword arguments (lists as tuples, so they hash)."""
        return {k: tuple(v) if isinstance(v, list) else v for k, v in self.model_dump().items()}


def tier_options(name: str, section: dict) -> dict:
    """Constructor keyword arguments of model ``name`` from the ``forecast:`` section
    ``section`` (a dict): its :attr:`Forecaster.settings` validated from it.

    Raises KeyError for an unknown name, pydantic.ValidationError for a bad value."""
    return forecaster_class(name).settings.model_validate(section).kwargs()


class Forecaster(ABC):
    """Base class: ``fit(history, meta)`` then ``predict(history, origins)``.

    Class attributes
    ----------------
    name: registry name (``hourly``, ``daily``, ``weekly``, ``naive`` ...).
    step: the grid it works on (``5min`` or ``1h``).
    horizon: number of steps it forecasts.
    min_history: least number of non-missing steps of history per series
        before the fit origin; shorter series get a stated fallback.
    refit_every: refit cadence used by rolling-origin backtests
        (``None``: fit once, at the first origin).
    settings: its typed options (:class:`TierSettings`; none by default).
    per_series: one model per series (``True``: saved and reused per series)
        or one global model for all (``False``: the daily LSTM).
    arch: what a saved model was built as (architecture and target); a saved
        model of another ``arch`` is refused by :meth:`load`.
    fit_options: the attributes besides the data that decide what :meth:`fit`
        learns (e.g. the LSTM's ``seed`` and ``epochs``); :meth:`save` records
        them (:meth:`fitted_with`) and :meth:`load` refuses a model fitted with
        other values, so a changed option or run seed takes effect at once.
    """

    name: ClassVar[str] = "base"
    step: ClassVar[str] = "5min"
    horizon: ClassVar[int] = 12
    min_history: ClassVar[int] = 1
    refit_every: ClassVar[str | None] = None
    per_series: ClassVar[bool] = True
    settings: ClassVar[type[TierSettings]] = TierSettings
    arch: ClassVar[str] = ""
    fit_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, seed: int = 0, **options):
        self.seed = seed
        self.options = options
        #: series_id -> sentence saying which simpler model was used and why
        self.fallbacks: dict[str, str] = {}
        #: library warnings and notes captured during fit, per series (statsmodels style: data, not noise)
        self.warnings: dict[str, list[str]] = {}
        #: series_id -> (first, last) timestamp of the data the model was fitted on
        self.data_range: dict[str, tuple[pd.Timestamp, pd.Timestamp]] = {}
        #: backtest scores to record with a saved model (set by the caller; JSON-able)
        self.scores: dict[str, Any] = {}

    @abstractmethod
    def fit(self, history: pd.DataFrame, meta: dict[str, SeriesMeta]) -> "Forecaster":
        """Fit on ``history`` (all of it is before the fit origin). Returns self."""

    @abstractmethod
    def predict(self, history: pd.DataFrame, origins: dict[str, list[pd.Timestamp]] | None = None) -> pd.DataFrame:
        """Forecast ``horizon`` steps after each origin.

        Parameters
        ----------
        history: the same grid as ``fit``; rows after an origin are ignored
            for that origin.
        origins: per series, the issue times (grid timestamps). ``None``
            means one origin per series at its last timestamp.

        Returns
        -------
        A forecast frame (:data:`forecasting.types.FORECAST_COLUMNS`).
        """

    # persistence ----------------------------------------------------------------
    def fitted_series(self) -> list[str]:
        """Series that have a fitted model of this tier (not a fallback). Benchmarks: none."""
        return []

    def _state(self, series: list[str]) -> dict:
        """JSON-able state of the fitted models of ``series`` (subclasses)."""
        return {}

    def _write_files(self, directory: Path, series: list[str]) -> None:
        """Extra model files beside ``forecaster.json`` (e.g. ``model.keras``)."""

    def _restore(self, state: dict, directory: Path) -> None:
        """Inverse of :meth:`_state` / :meth:`_write_files` (subclasses)."""

    def save(self, directory: str | os.PathLike, series: list[str] | None = None) -> Path:
        """Write the fitted model(s) to ``directory`` in safe formats only (JSON, ``.keras``;
        never pickle): ``forecaster.json`` holds the tier, ``arch``, save format, the
        series, each series' data range (ISO timestamps, UTC), library versions, the
        backtest ``scores`` and the tier's state; a global model adds its own files.

        ``series``: the series to save (default: every fitted one; a global model
        always saves itself whole). Returns the path of ``forecaster.json``.
        """
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        sids = sorted(self.fitted_series() if series is None or not self.per_series else
                      [s for s in series if s in self.fitted_series()])
        rng = {s: [pd.Timestamp(a).isoformat(), pd.Timestamp(b).isoformat()]
               for s, (a, b) in self.data_range.items() if s in sids}
        self._write_files(d, sids)
        doc = {"tier": self.name, "arch": self.arch, "format": SAVE_FORMAT, "series": sids, "data_range": rng,
               "fitted_with": self.fitted_with(), "versions": library_versions(SAVED_LIBS), "scores": self.scores,
               "state": self._state(sids)}
        path = d / "forecaster.json"
        path.write_text(json.dumps(doc, indent=1, default=str))
        return path

    def load(self, directory: str | os.PathLike) -> "Forecaster":
        """Add the models saved in ``directory`` by :meth:`save` to this forecaster (per-series
        tiers may load several directories, one per series). Returns self.

        Raises
        ------
        ModelFileError: missing or unreadable files, or a model saved by another tier,
            ``arch`` or save format, or fitted with other :attr:`fit_options` values
            (a file saved before they were recorded counts as other values).
        """
        d = Path(directory)
        try:
            doc = json.loads((d / "forecaster.json").read_text())
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"{d}: no readable forecaster.json ({exc})") from None
        want = (self.name, self.arch, SAVE_FORMAT)
        got = (doc.get("tier"), doc.get("arch"), doc.get("format"))
        if got != want:
            raise ModelFileError(f"{d}: saved as tier/arch/format {got}, this is {want}")
        saved, now = doc.get("fitted_with"), self.fitted_with()
        if saved != now:
            known = saved if isinstance(saved, dict) else {}  # absent (an older file) or not a mapping
            diff = ", ".join(f"{k} {known.get(k, 'unrecorded')!r} (now {v!r})" for k, v in now.items()
                             if known.get(k, object()) != v)
            raise ModelFileError(f"{d}: fitted with other options: {diff or repr(saved)[:200]}")
        try:
            self._restore(doc["state"], d)
        except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
            raise ModelFileError(f"{d}: state cannot be restored ({type(exc).__name__}: {exc})") from None
        for s, (a, b) in doc.get("data_range", {}).items():
            self.data_range[s] = (pd.Timestamp(a), pd.Timestamp(b))
        self.scores = doc.get("scores", {})
        return self

    def fitted_with(self) -> dict[str, Any]:
        """The values of :attr:`fit_options` (attribute name -> value, as JSON reads them back:
        tuples become lists), which :meth:`save` records and :meth:`load` compares."""
        return json.loads(json.dumps({k: getattr(self, k) for k in self.fit_options}, default=str))

    def _note_range(self, history: pd.DataFrame) -> None:
        """Record each series' fitted data range (non-missing rows) for :meth:`save`."""
        g = history.dropna(subset=["value"]).groupby("series_id")["timestamp"].agg(["min", "max"])
        for sid, row in g.iterrows():
            self.data_range[sid] = (row["min"], row["max"])

    # helpers for subclasses -------------------------------------------------
    def _origins(self, history: pd.DataFrame, origins) -> dict[str, list[pd.Timestamp]]:
        if origins is not None:
            return origins
        last = history.dropna(subset=["value"]).groupby("series_id")["timestamp"].max()
        full_last = history.groupby("series_id")["timestamp"].max()
        return {sid: [full_last.get(sid, last.get(sid))] for sid in full_last.index}

    def _frame(self, sid: str, issued_at: pd.Timestamp, q: np.ndarray) -> pd.DataFrame:
        """Build forecast rows for one origin from a ``(horizon, 4)`` quantile array."""
        step = pd.Timedelta(self.step)
        ts = pd.date_range(issued_at + step, periods=q.shape[0], freq=step)
        f = pd.DataFrame(q, columns=list(QCOLS))
        f.insert(0, "timestamp", ts)
        f.insert(0, "issued_at", issued_at)
        f.insert(0, "tier", self.name)
        f.insert(0, "series_id", sid)
        return f

    @staticmethod
    def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
        if not frames:
            return empty_forecast()
        out = pd.concat(frames, ignore_index=True)
        out["issued_at"] = pd.to_datetime(out["issued_at"], utc=True).astype("datetime64[ns, UTC]")
        out["timestamp"] = pd.to_datetime(out["timestamp"], utc=True).astype("datetime64[ns, UTC]")
        return out[FORECAST_COLUMNS]


def series_values(history: pd.DataFrame, sid: str, column: str = "value") -> pd.Series:
    """One series of a history frame as a Series indexed by timestamp (``column``:
    ``value``, or ``mean``/``last`` of an hourly frame, :func:`forecasting.regularise.to_hourly`)."""
    g = history[history["series_id"] == sid]
    return pd.Series(g[column].to_numpy(dtype="float64"), index=pd.DatetimeIndex(g["timestamp"]))
