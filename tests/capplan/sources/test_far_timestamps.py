"""A timestamp beyond what a nanosecond timestamp holds (year 9999, year 1000) is bad input naming its row
(exit 2), in ISO form with or without an offset and in a Parquet file, never an internal error."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.conftest import run_cli


def _rows(far: str) -> pd.DataFrame:
    ts = pd.date_range("2026-01-01", periods=40, freq="5min", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")
    df = pd.DataFrame({"timestamp": list(ts), "series_id": "train/a", "value": 3.0})
    df.loc[len(df)] = [far, "train/b", 1.0]
    return df


@pytest.mark.parametrize("far", ["9999-12-31T23:55:00Z", "9999-12-31T23:55:00", "1000-01-01T00:00:00+08:00"])
def test_far_timestamp_in_csv_is_bad_input_naming_the_row(tmp_path, capsys, far):
    p = tmp_path / "d.csv"
    _rows(far).to_csv(p, index=False)
    code, out, err = run_cli(["plan", "--source", f"csv:{p}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and "internal error" not in err
    assert "row 42" in err and "column timestamp" in err and far in err


def test_far_timestamp_in_parquet_is_bad_input(tmp_path, capsys):
    df = _rows("2026-01-01T00:00:00Z")
    df["timestamp"] = pd.to_datetime(df["timestamp"], utc=True).astype("datetime64[us, UTC]")
    df.loc[len(df) - 1, "timestamp"] = pd.Timestamp("9999-12-31T23:55:00", tz="UTC").as_unit("us")
    p = tmp_path / "d.parquet"
    df.to_parquet(p, index=False)
    code, out, err = run_cli(["plan", "--source", f"parquet:{p}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and "internal error" not in err and "row 42" in err
