"""Calendars: China public holidays, make-up workdays (调休) and custom events.

Source: the ``holidays`` package's ``China`` calendar, which follows the State
Council's yearly notices and lists both the days off and the weekend days that
become working days (``weekend_workdays``). A plain holiday list misses those
make-up workdays, so they are a feature of their own here.

Shopping festivals (618, Double 11) are optional custom events for Prophet.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

import holidays
import numpy as np
import pandas as pd

#: Custom events a user may switch on (``weekly.events`` in the config):
#: name -> (month, day, lower_window_days, upper_window_days).
CUSTOM_EVENTS: dict[str, tuple[int, int, int, int]] = {
    "618": (6, 18, -2, 1),
    "double11": (11, 11, -3, 1),
}


@lru_cache(maxsize=64)
def _cn(years: tuple[int, ...]) -> holidays.HolidayBase:
    return holidays.China(years=list(years))


def china_days(years: range | list[int]) -> tuple[set[dt.date], set[dt.date]]:
    """Return ``(holidays, makeup_workdays)`` for the given years (local dates)."""
    cal = _cn(tuple(sorted(set(years))))
    days_off = set(cal.keys())
    makeup = {d for d in cal.weekend_workdays if d.year in set(years)}
    return days_off, makeup


def calendar_features(ts: pd.DatetimeIndex, timezone: str = "Asia/Shanghai") -> np.ndarray:
    """Calendar features for the LSTM, one row per timestamp.

    Parameters
    ----------
    ts: tz-aware timestamps (UTC).
    timezone: IANA zone of the series; hours and dates are local.

    Returns
    -------
    float32 array of shape ``(len(ts), 6)``: sin/cos of hour of day, sin/cos of
    day of week, China public-holiday flag, make-up workday flag.
    """
    local = ts.tz_convert(timezone)
    hour = local.hour.to_numpy() + local.minute.to_numpy() / 60.0
    dow = local.dayofweek.to_numpy()
    years = sorted(set(local.year.tolist())) or [2020]
    off, makeup = china_days(years)
    dates = local.date
    hol = np.fromiter((d in off for d in dates), dtype=bool, count=len(dates))
    mk = np.fromiter((d in makeup for d in dates), dtype=bool, count=len(dates))
    return np.column_stack(
        [
            np.sin(2 * np.pi * hour / 24),
            np.cos(2 * np.pi * hour / 24),
            np.sin(2 * np.pi * dow / 7),
            np.cos(2 * np.pi * dow / 7),
            hol.astype(float),
            mk.astype(float),
        ]
    ).astype("float32")


def prophet_holidays(years: list[int], events: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """A Prophet ``holidays`` frame for China, with holiday windows and events.

    Columns ``holiday, ds, lower_window, upper_window`` (Prophet's format).
    Golden Week (National Day, 1–7 October) and the Spring Festival week come
    out as consecutive named days from the calendar; each gets a one-day
    window on both sides for the travel days around it. Make-up workdays are
    *not* holidays: they are passed as the regressor ``makeup_workday``
    (see :func:`makeup_regressor`) so that a weekend working day is modelled as
    a working day. ``events`` adds entries of :data:`CUSTOM_EVENTS`.
    """
    off, _ = china_days(years)
    cal = _cn(tuple(sorted(set(years))))
    rows = []
    for d in sorted(off):
        name = cal.get(d) or "holiday"
        base = "spring_festival" if "Spring Festival" in name or "Chinese New Year" in name else (
            "golden_week" if "National Day" in name else "cn_holiday")
        rows.append({"holiday": base, "ds": pd.Timestamp(d), "lower_window": -1, "upper_window": 1})
    for ev in events:
        if ev not in CUSTOM_EVENTS:
            raise ValueError(f"unknown custom event {ev!r}; known: {sorted(CUSTOM_EVENTS)}")
        m, day, lo, up = CUSTOM_EVENTS[ev]
        for y in years:
            rows.append({"holiday": ev, "ds": pd.Timestamp(y, m, day), "lower_window": lo, "upper_window": up})
    return pd.DataFrame(rows, columns=["holiday", "ds", "lower_window", "upper_window"])


def makeup_regressor(ds: pd.Series, timezone: str) -> np.ndarray:
    """1.0 where the local date of naive-UTC ``ds`` is a China make-up workday, else 0.0."""
    local = pd.DatetimeIndex(ds).tz_localize("UTC").tz_convert(timezone)
    years = sorted(set(local.year.tolist())) or [2020]
    _, makeup = china_days(years)
    return np.fromiter((d in makeup for d in local.date), dtype=float, count=len(local))
