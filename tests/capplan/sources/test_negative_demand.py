"""Negative demand is a data warning naming the first rows (it is clipped to 0 when regularised, never
silently): in load_source's warnings, among the report's series warnings under "Act on"."""

from __future__ import annotations

import numpy as np
import pandas as pd

from capplan.report.notes import SHOWN_WARNINGS
from capplan.sources import load_source
from capplan.sources.implausible import negative_warnings
from tests.capplan.test_bad_input import demand, write_csv


def test_negative_values_are_a_warning_naming_the_first_rows(tmp_path):
    vals = [repr(float(v) + 8) for v in demand()]
    for i in (5, 9, 11, 20):
        vals[i] = "-3"
    h = load_source(f"csv:{write_csv(tmp_path / 'd.csv', values=vals)}")
    w = h.warnings["a"]
    assert w.startswith("data: 4 negative value(s) clipped to 0") and w.startswith(SHOWN_WARNINGS), w
    assert f"in {tmp_path / 'd.csv'}: -3 at row 7 (2024-05-01T00:25:00+00:00), -3 at row 11 (" in w, w
    assert "-3 at row 13 (" in w and "and 1 more" in w and w.count("d.csv") == 1, w
    assert "row 22" not in w  # the first rows only
    assert (h.frame["value"] < 0).sum() == 4  # kept for regularise to clip and count
    ok = load_source(f"csv:{write_csv(tmp_path / 'ok.csv', values=[repr(float(v) + 8) for v in demand()])}")
    assert ok.warnings == {}


def test_a_series_with_a_spike_and_a_negative_value_keeps_both_in_one_line():
    t = pd.date_range("2024-01-01", periods=300, freq="5min", tz="UTC")
    x = np.full(300, 2.0)
    x[3], x[7] = 5000.0, -1.0
    f = pd.DataFrame({"series_id": "a", "timestamp": t, "value": x})
    assert list(negative_warnings(f)) == ["a"] and "-1 in " not in negative_warnings(f)["a"]
    assert negative_warnings(f.assign(value=np.abs(x))) == {}
    assert "(2024-01-01T00:35:00+00:00)" in negative_warnings(f)["a"]
