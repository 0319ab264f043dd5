"""Inputs: csv/parquet parsing and the bad inputs that must exit 2 with a message naming the input."""

from __future__ import annotations

import pandas as pd
import pytest

from capplan.errors import InputError
from capplan.sources import load_source
from tests.conftest import run_cli


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_timestamp_forms_all_become_utc(tmp_path):
    p = write(tmp_path, "d.csv", "timestamp,series_id,value,kind\n"
              "2024-05-01T08:00:00+08:00,a,1,training\n"
              "2024-05-01 00:05:00,a,2,training\n"
              "1714522200,a,3,training\n"
              "2024-05-01T00:15:00Z,a,,training\n")
    h = load_source(f"csv:{p}")
    ts = list(h.frame["timestamp"])
    assert str(h.frame["timestamp"].dtype) == "datetime64[ns, UTC]"
    assert ts[0] == pd.Timestamp("2024-05-01T00:00:00Z")
    assert ts[1] == pd.Timestamp("2024-05-01T00:05:00Z")
    assert ts[2] == pd.Timestamp("2024-05-01T00:10:00Z")
    assert h.frame["value"].isna().sum() == 1
    assert h.meta["a"].kind == "training" and h.meta["a"].unit == "gpu"


def test_naive_timestamps_use_timezone_option(tmp_path):
    p = write(tmp_path, "d.csv", "timestamp,series_id,value\n2024-05-01 08:00:00,a,1\n")
    h = load_source(f"csv:{p}", timezone="Asia/Shanghai")
    assert h.frame["timestamp"].iloc[0] == pd.Timestamp("2024-05-01T00:00:00Z")
    assert any("assumed training" in n for n in h.notes)


def test_parquet_source(tmp_path):
    f = pd.DataFrame({"timestamp": pd.date_range("2024-01-01", periods=3, freq="5min", tz="UTC"),
                      "series_id": "infer/x", "value": [1.0, 2.0, 3.0], "kind": "inference"})
    p = tmp_path / "d.parquet"
    f.to_parquet(p)
    h = load_source(f"parquet:{p}")
    assert h.meta["infer/x"].unit == "replica"
    assert h.frame["value"].tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("content, expect", [
    ("", "is empty"),
    ("timestamp,value\n2024-01-01,1\n", "missing column(s) series_id"),
    ("timestamp,series_id,value\nyesterday,a,1\n", "row 2: column timestamp"),
    ("timestamp,series_id,value\n2024-01-01T00:00:00Z,a,1\n2024-01-01T00:05:00Z,a,lots\n", "row 3: column value"),
])
def test_bad_csv_exits_2_naming_the_input(tmp_path, capsys, content, expect):
    p = write(tmp_path, "bad.csv", content)
    code, out, err = run_cli(["plan", "--source", f"csv:{p}", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2
    assert str(p) in err and expect in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_unknown_series_exits_2(tmp_path, capsys):
    code, _, err = run_cli(["plan", "--series", "train/nope", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2
    assert "train/nope" in err and "known:" in err


def test_unknown_source_form(tmp_path, capsys):
    code, _, err = run_cli(["plan", "--source", "ftp:x", "--out", str(tmp_path / "o"), "-q"], capsys)
    assert code == 2 and "ftp:x" in err


def test_missing_file_and_bad_config(tmp_path, capsys):
    with pytest.raises(InputError, match="file not found"):
        load_source(f"csv:{tmp_path / 'nope.csv'}")
    cfg = write(tmp_path, "c.yaml", "plan:\n  n_calls: two\n")
    code, _, err = run_cli(["plan", "--config", str(cfg), "-q"], capsys)
    assert code == 2 and "plan.n_calls" in err and str(cfg) in err
    no_prom = write(tmp_path, "p.yaml", "plan:\n  n_calls: 8\n")
    code, _, err = run_cli(["ingest", "--config", str(no_prom), "-q"], capsys)
    assert code == 2 and str(no_prom) in err and "prometheus:" in err


def test_help_explains_every_option(capsys):
    code, out, _ = run_cli(["plan", "--help"], capsys)
    assert code == 0
    for opt in ("--source", "--config", "--out", "--series", "--seed", "--format", "--timezone"):
        assert opt in out


def test_a_note_belongs_to_the_longest_series_id_it_names():
    import pandas as pd

    from capplan.sources import LoadedHistory

    h = LoadedHistory(pd.DataFrame(), {}, notes=["a:b: 3 implausible values", "a: 1 gap", "file: 2 rows dropped"])
    ids = ["a", "a:b"]
    assert h.notes_for("a", ids) == ["a: 1 gap", "file: 2 rows dropped"]
    assert h.notes_for("a:b", ids) == ["a:b: 3 implausible values", "file: 2 rows dropped"]


def test_missing_values_are_noted_on_their_own_series_only(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("timestamp,series_id,value\n2026-01-01T00:00:00Z,a,1\n2026-01-01T00:05:00Z,a,\n"
                 "2026-01-01T00:00:00Z,b,2\n2026-01-01T00:05:00Z,b,3\n")
    h = load_source(f"csv:{p}")
    ids = ["a", "b"]
    assert any("1 missing values read as NaN" in n for n in h.notes_for("a", ids))
    assert not any("read as NaN" in n for n in h.notes_for("b", ids))
