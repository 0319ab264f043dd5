"""China's calendar: every day of every official window 2019-2027, named, with
make-up workdays; and Prophet's holiday effects aligned to the series' local days.

Expected values are typed from the State Council General Office's annual notices
(国务院办公厅关于 YYYY 年部分节假日安排的通知), independently of the module's table layout:
per year, the official windows as (first, last) and the make-up workdays.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from forecasting.calendar import (
    PROVISIONAL,
    calendar_features,
    china_days,
    china_holiday_names,
    local_naive,
    makeup_regressor,
    prophet_holidays,
)

D = dt.date.fromisoformat
NOTICES = {
    2019: ([("2019-01-01", "2019-01-01"), ("2019-02-04", "2019-02-10"), ("2019-04-05", "2019-04-07"),
            ("2019-05-01", "2019-05-04"), ("2019-06-07", "2019-06-09"), ("2019-09-13", "2019-09-15"),
            ("2019-10-01", "2019-10-07")],
           ["2019-02-02", "2019-02-03", "2019-04-28", "2019-05-05", "2019-09-29", "2019-10-12"]),
    2020: ([("2020-01-01", "2020-01-01"), ("2020-01-24", "2020-02-02"), ("2020-04-04", "2020-04-06"),
            ("2020-05-01", "2020-05-05"), ("2020-06-25", "2020-06-27"), ("2020-10-01", "2020-10-08")],
           ["2020-01-19", "2020-04-26", "2020-05-09", "2020-06-28", "2020-09-27", "2020-10-10"]),
    2021: ([("2021-01-01", "2021-01-03"), ("2021-02-11", "2021-02-17"), ("2021-04-03", "2021-04-05"),
            ("2021-05-01", "2021-05-05"), ("2021-06-12", "2021-06-14"), ("2021-09-19", "2021-09-21"),
            ("2021-10-01", "2021-10-07")],
           ["2021-02-07", "2021-02-20", "2021-04-25", "2021-05-08", "2021-09-18", "2021-09-26", "2021-10-09"]),
    2022: ([("2022-01-01", "2022-01-03"), ("2022-01-31", "2022-02-06"), ("2022-04-03", "2022-04-05"),
            ("2022-04-30", "2022-05-04"), ("2022-06-03", "2022-06-05"), ("2022-09-10", "2022-09-12"),
            ("2022-10-01", "2022-10-07"), ("2022-12-31", "2022-12-31")],
           ["2022-01-29", "2022-01-30", "2022-04-02", "2022-04-24", "2022-05-07", "2022-10-08", "2022-10-09"]),
    2023: ([("2023-01-01", "2023-01-02"), ("2023-01-21", "2023-01-27"), ("2023-04-05", "2023-04-05"),
            ("2023-04-29", "2023-05-03"), ("2023-06-22", "2023-06-24"), ("2023-09-29", "2023-10-06")],
           ["2023-01-28", "2023-01-29", "2023-04-23", "2023-05-06", "2023-06-25", "2023-10-07", "2023-10-08"]),
    2024: ([("2024-01-01", "2024-01-01"), ("2024-02-10", "2024-02-17"), ("2024-04-04", "2024-04-06"),
            ("2024-05-01", "2024-05-05"), ("2024-06-08", "2024-06-10"), ("2024-09-15", "2024-09-17"),
            ("2024-10-01", "2024-10-07")],
           ["2024-02-04", "2024-02-18", "2024-04-07", "2024-04-28", "2024-05-11", "2024-09-14", "2024-09-29",
            "2024-10-12"]),
    2025: ([("2025-01-01", "2025-01-01"), ("2025-01-28", "2025-02-04"), ("2025-04-04", "2025-04-06"),
            ("2025-05-01", "2025-05-05"), ("2025-05-31", "2025-06-02"), ("2025-10-01", "2025-10-08")],
           ["2025-01-26", "2025-02-08", "2025-04-27", "2025-09-28", "2025-10-11"]),
    2026: ([("2026-01-01", "2026-01-03"), ("2026-02-15", "2026-02-23"), ("2026-04-04", "2026-04-06"),
            ("2026-05-01", "2026-05-05"), ("2026-06-19", "2026-06-21"), ("2026-09-25", "2026-09-27"),
            ("2026-10-01", "2026-10-07")],
           ["2026-01-04", "2026-02-14", "2026-02-28", "2026-05-09", "2026-09-20", "2026-10-10"]),
    # provisional (no notice yet): statutory days, weekend statutory days observed on the next
    # working day, adjoining weekends
    2027: ([("2027-01-01", "2027-01-03"), ("2027-02-05", "2027-02-10"), ("2027-04-03", "2027-04-05"),
            ("2027-05-01", "2027-05-04"), ("2027-06-09", "2027-06-09"), ("2027-09-15", "2027-09-15"),
            ("2027-10-01", "2027-10-05")], []),
}


def _days(a: str, b: str) -> set[dt.date]:
    return {d.date() for d in pd.date_range(a, b, freq="D")}


@pytest.mark.parametrize("year", sorted(NOTICES))
def test_every_day_of_every_window(year):
    windows, makeup = NOTICES[year]
    expected = set().union(*(_days(a, b) for a, b in windows))
    off, mk = china_days([year])
    assert off == expected
    assert mk == {D(d) for d in makeup}
    assert not off & mk
    assert all(d.weekday() >= 5 for d in mk)  # a make-up workday is always a weekend day
    assert (year in PROVISIONAL) == (not makeup)


def test_weekend_days_inside_windows_are_days_off():
    off, _ = china_days(range(2019, 2028))
    for d in ("2024-10-05", "2024-10-06", "2025-10-04", "2025-10-05", "2026-02-15", "2026-02-21",
              "2026-02-22", "2020-05-02", "2020-05-03"):
        assert D(d) in off, d


def test_holidays_are_named_per_festival_and_day():
    names = china_holiday_names([2024, 2025, 2026])
    assert names[D("2026-02-15")] == "Spring Festival day 1"
    assert names[D("2026-02-23")] == "Spring Festival day 9"
    assert names[D("2024-10-05")] == "National Day (Golden Week) day 5"
    assert names[D("2025-10-06")] == "Mid-Autumn Festival and National Day (Golden Week) day 6"
    assert names[D("2025-05-03")] == "Labour Day day 3"
    assert names[D("2025-01-01")] == "New Year's Day"


def test_features_flag_local_days():
    # 2024-10-01 00:00 in Shanghai is 2024-09-30 16:00 UTC
    ts = pd.DatetimeIndex(["2024-09-30 15:00", "2024-09-30 16:00"], tz="UTC")
    f = calendar_features(ts, "Asia/Shanghai")
    assert f[:, 4].tolist() == [0.0, 1.0]
    assert makeup_regressor(local_naive(pd.DatetimeIndex(["2024-09-29 00:30"], tz="Asia/Shanghai"),
                                        "Asia/Shanghai")).tolist() == [1.0]


def test_prophet_windows_cover_travel_days():
    h = prophet_holidays([2026])
    sf = h[h["holiday"] == "spring_festival"].sort_values("ds")
    assert len(sf) == 9 and sf["lower_window"].iloc[0] == -1 and sf["upper_window"].iloc[-1] == 1
    assert set(h["holiday"]) == {"spring_festival", "golden_week", "cn_holiday"}


def test_prophet_holiday_effect_starts_at_local_midnight():
    """A Shanghai series: the fitted National Day effect switches on at 00:00 local
    (16:00 UTC the day before), not at 08:00 local."""
    from forecasting.tiers import make
    from forecasting.types import SeriesMeta

    ts = pd.date_range("2024-09-10", "2024-10-01 15:00", freq="1h", tz="UTC")
    local = ts.tz_convert("Asia/Shanghai")
    y = 50 + 10 * np.sin(2 * np.pi * local.hour / 24)
    h = pd.DataFrame({"series_id": "p", "timestamp": ts, "value": y})
    m = make("weekly", seed=0, uncertainty_samples=0).fit(h, {"p": SeriesMeta(timezone="Asia/Shanghai")})
    model = m.models["p"]
    targets = pd.DatetimeIndex(["2024-09-29 15:00", "2024-09-29 16:00", "2024-09-30 15:00", "2024-09-30 16:00"],
                               tz="UTC")
    fut = m._frame_in(local_naive(targets, "Asia/Shanghai"), "p")
    comp = model.predict(fut)
    # the day before National Day (30 Sep local) is golden_week -1; 1 Oct local is golden_week +0
    feats = model.make_holiday_features(fut["ds"], model.holidays)[0]
    assert feats["golden_week_delim_-1"].tolist() == [0.0, 1.0, 1.0, 0.0]
    assert feats["golden_week_delim_+0"].tolist() == [0.0, 0.0, 0.0, 1.0]
    # and the fitted effect is zero at 23:00 local on 29 Sep, on from 00:00 local on 30 Sep
    assert comp["holidays"].iloc[0] == 0.0 and comp["holidays"].iloc[1] != 0.0
