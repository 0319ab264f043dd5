"""Many short series: the load stage fails each one shorter than a plan needs as ``too short`` (not a
numpy error later in the search), in time linear in the number of series, with progress lines; the
CLI exits 3 and lists them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from capplan.config.settings import CapplanConfig
from capplan.run.stages.load import prepare
from capplan.run.state import Ledger
from capplan.sources.history import LoadedHistory
from forecasting.backtest import MIN_POINTS, split_windows
from forecasting.types import SeriesMeta
from tests.conftest import run_cli


def _frame(n_short: int, rows: int = 10, days: int = 16) -> pd.DataFrame:
    ts = pd.date_range("2026-01-01", periods=days * 288, freq="5min", tz="UTC")
    rng = np.random.default_rng(0)
    long = pd.DataFrame({"series_id": "train/long", "timestamp": ts,
                         "value": 10 + 4 * np.sin(np.arange(len(ts)) / 288 * 2 * np.pi)})
    starts = rng.integers(0, len(ts) - rows, n_short)
    short = pd.DataFrame({"series_id": np.repeat([f"train/s{i:04d}" for i in range(n_short)], rows),
                          "timestamp": ts[(starts[:, None] + np.arange(rows)).ravel()],
                          "value": rng.integers(1, 9, n_short * rows).astype(float)})
    return pd.concat([long, short], ignore_index=True)


def test_split_windows_says_too_short():
    idx = pd.date_range("2026-01-01", periods=MIN_POINTS - 1, freq="5min", tz="UTC")
    with pytest.raises(ValueError, match="too short"):
        split_windows(idx)
    assert split_windows(pd.date_range("2026-01-01", periods=MIN_POINTS, freq="5min", tz="UTC")).rule != "days"


def test_300_short_series_fail_as_too_short_with_progress():
    f = _frame(300)
    loaded = LoadedHistory(f, {s: SeriesMeta() for s in f["series_id"].unique()}, [], label="many.csv")
    ledger, lines = Ledger(), []
    prep = prepare(loaded, CapplanConfig(), ledger, progress=lines.append)
    failed = ledger.failed
    assert list(prep.windows) == ["train/long"] and len(failed) == 300
    assert all(v["stage"] == "regularise" and ": 10 row(s) in many.csv" in v["error"]
               and "too short:" in v["error"]
               and f"at least {MIN_POINTS}" in v["error"] for v in failed.values())
    assert any("grid" in x for x in lines), lines


@pytest.mark.slow
def test_cli_exits_3_listing_the_short_series(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _frame(300)
    f["timestamp"] = f["timestamp"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    f.to_csv(tmp_path / "many.csv", index=False)
    code, out, err = run_cli(["plan", "--source", f"csv:{tmp_path / 'many.csv'}", "--quick", "--out",
                              str(tmp_path / "o"), "--store", str(tmp_path / "store")], capsys)
    assert code == 3, err[-2000:]
    assert err.count("too short") >= 50 and "250 more: 250 too short" in err
    assert "regularise:" in err and "broadcast" not in err
