"""A new model is one module (its Forecaster and typed settings) plus one registry line:
the toy tier below is registered that way and is then made, configured and backtested by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pydantic import Field, ValidationError

from capplan.config.settings import CapplanConfig
from forecasting import backtest as bt
from forecasting.regularise import regularise, to_hourly
from forecasting.tiers import base
from forecasting.tiers.base import (
    Forecaster,
    TierSettings,
    is_global,
    make,
    names,
    register,
    series_values,
    tier_options,
)
from forecasting.types import SeriesMeta


# -- the "file": a toy model with one typed option -------------------------------------------
class ToySettings(TierSettings):
    level: float = Field(default=1.0, alias="toy_level", ge=0, description="the constant it forecasts")


class ToyTier(Forecaster):
    """Forecasts a constant ``level`` at every quantile, 12 five-minute steps ahead."""

    step = "5min"
    horizon = 12
    settings = ToySettings

    def __init__(self, seed: int = 0, level: float = 1.0, **options):
        super().__init__(seed=seed, **options)
        self.level = level

    def fit(self, history, meta):
        return self

    def predict(self, history, origins=None):
        frames = [self._frame(sid, o, np.full((self.horizon, 4), self.level))
                  for sid, ors in self._origins(history, origins).items() for o in ors
                  if len(series_values(history, sid))]
        return self._concat(frames)


@pytest.fixture
def toy(monkeypatch):
    """The registry line, on copies of the registry so no other test sees the toy."""
    monkeypatch.setattr(base, "_REGISTRY", base._REGISTRY.copy())
    monkeypatch.setattr(base, "_ROLES", dict(base._ROLES))
    register("toy", ToyTier, "benchmark")
    return "toy"


def _history(days: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    ts = pd.date_range("2024-01-01", periods=days * 288, freq="5min", tz="UTC")
    raw = pd.DataFrame({"series_id": "a", "timestamp": ts, "value": 5.0 + np.sin(np.arange(len(ts)) / 20)})
    h5, _ = regularise(raw)
    return h5, to_hourly(h5)


def test_a_registered_toy_tier_is_made_configured_and_backtested_by_name(toy):
    assert names("benchmark")[-1] == "toy" and "toy" not in names("tier", "member")
    assert not is_global("toy")
    # its settings come from the forecast: section through its own typed model
    assert tier_options("toy", {"toy_level": 2.5, "lstm_epochs": 3}) == {"level": 2.5}
    assert CapplanConfig().forecast.tier_options()["toy"] == {"level": 1.0}
    with pytest.raises(ValidationError):
        tier_options("toy", {"toy_level": -1})
    m = make("toy", **tier_options("toy", {"toy_level": 2.5}))
    assert m.name == "toy" and m.level == 2.5
    h5, h1 = _history()
    origins = {"a": list(h5["timestamp"].iloc[[300, 400, 500]])}
    f, fallbacks, _ = bt.rolling_forecasts("toy", h5, h1, {"a": SeriesMeta()}, origins, 0, {"level": 2.5})
    assert fallbacks == {} and len(f) == 3 * 12
    assert (f["tier"] == "toy").all() and np.allclose(f[["p50", "p90", "p95", "p99"]].to_numpy(), 2.5)
    assert (f["timestamp"] > f["issued_at"]).all()


def test_the_registry_lists_each_model_once_with_its_role():
    assert names("tier") == ("hourly", "daily", "weekly")
    assert names("tier", "member") == ("hourly", "daily", "weekly", "naive", "seasonal_naive", "level", "revert",
                                       "profile")
    assert [n for n in names() if is_global(n)] == ["daily"]  # the LSTM says so itself (per_series = False)
    with pytest.raises(KeyError, match="unknown forecaster 'nope'"):
        make("nope")
