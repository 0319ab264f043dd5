"""Calendars: China public holidays, make-up workdays (调休) and custom events.

Source: a checked-in table of the State Council General Office's (国务院办公厅)
annual notices "关于 YYYY 年部分节假日安排的通知", published on www.gov.cn each
November/December for the following year:

* 2019: notice of 2018-12 (国办发明电〔2018〕15号), Labour Day changed by the
  notice of 2019-03 adjusting the 2019 Labour Day holiday (to 1–4 May);
* 2020: notice of 2019-11 (国办发明电〔2019〕16号), Spring Festival extended to
  2 February by 国务院办公厅关于延长2020年春节假期的通知 (国办发明电〔2020〕1号,
  2020-01-27), which also cancelled the 1 February make-up workday;
* 2021, 2022, 2023, 2024, 2025, 2026: the notices of 2020-11, 2021-10,
  2022-12, 2023-10, 2024-11 and 2025-11 (2025 onward under the revised
  全国年节及纪念日放假办法 of 2024: Spring Festival 4 statutory days, Labour
  Day 2);
* 2027: **provisional** — no notice was available when this table was written.
  The statutory days of the 2024 rules (New Year's Day, Spring Festival eve and
  days 1–3, Qingming, Labour Day 1–2 May, Dragon Boat, Mid-Autumn, National Day
  1–3 October), a statutory day on a weekend observed on the next working day,
  and the weekend days adjoining the window; no make-up workdays. Replace it
  when the notice appears.

Each official window lists *every* day off, weekend days inside it included
(they are days off like the rest), named per festival and day:
``Spring Festival day 3``, ``National Day (Golden Week) day 5``. Make-up
workdays — weekend days that become working days — are a feature of their
own, since a plain holiday list misses them. The ``holidays`` package lists
only the substituted weekdays of a window, not its weekend days, hence the
table.

Shopping festivals (618, Double 11) are optional custom events for Prophet.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache

import numpy as np
import pandas as pd

#: Custom events a user may switch on (``weekly.events`` in the config):
#: name -> (month, day, lower_window_days, upper_window_days).
CUSTOM_EVENTS: dict[str, tuple[int, int, int, int]] = {
    "618": (6, 18, -2, 1),
    "double11": (11, 11, -3, 1),
}

#: Festival key -> display name.
FESTIVALS: dict[str, str] = {
    "new_year": "New Year's Day",
    "spring_festival": "Spring Festival",
    "qingming": "Qingming Festival",
    "labour_day": "Labour Day",
    "dragon_boat": "Dragon Boat Festival",
    "mid_autumn": "Mid-Autumn Festival",
    "national_day": "National Day (Golden Week)",
    "mid_autumn_national_day": "Mid-Autumn Festival and National Day (Golden Week)",
}

#: Official windows per notice year: ``festival first-day last-day [make-up workdays...]``.
#: A window belongs to the year of its notice (New Year 2023 starts on 2022-12-31).
_TABLE = """
2019 new_year 2018-12-30 2019-01-01 2018-12-29
2019 spring_festival 2019-02-04 2019-02-10 2019-02-02 2019-02-03
2019 qingming 2019-04-05 2019-04-07
2019 labour_day 2019-05-01 2019-05-04 2019-04-28 2019-05-05
2019 dragon_boat 2019-06-07 2019-06-09
2019 mid_autumn 2019-09-13 2019-09-15
2019 national_day 2019-10-01 2019-10-07 2019-09-29 2019-10-12
2020 new_year 2020-01-01 2020-01-01
2020 spring_festival 2020-01-24 2020-02-02 2020-01-19
2020 qingming 2020-04-04 2020-04-06
2020 labour_day 2020-05-01 2020-05-05 2020-04-26 2020-05-09
2020 dragon_boat 2020-06-25 2020-06-27 2020-06-28
2020 mid_autumn_national_day 2020-10-01 2020-10-08 2020-09-27 2020-10-10
2021 new_year 2021-01-01 2021-01-03
2021 spring_festival 2021-02-11 2021-02-17 2021-02-07 2021-02-20
2021 qingming 2021-04-03 2021-04-05
2021 labour_day 2021-05-01 2021-05-05 2021-04-25 2021-05-08
2021 dragon_boat 2021-06-12 2021-06-14
2021 mid_autumn 2021-09-19 2021-09-21 2021-09-18
2021 national_day 2021-10-01 2021-10-07 2021-09-26 2021-10-09
2022 new_year 2022-01-01 2022-01-03
2022 spring_festival 2022-01-31 2022-02-06 2022-01-29 2022-01-30
2022 qingming 2022-04-03 2022-04-05 2022-04-02
2022 labour_day 2022-04-30 2022-05-04 2022-04-24 2022-05-07
2022 dragon_boat 2022-06-03 2022-06-05
2022 mid_autumn 2022-09-10 2022-09-12
2022 national_day 2022-10-01 2022-10-07 2022-10-08 2022-10-09
2023 new_year 2022-12-31 2023-01-02
2023 spring_festival 2023-01-21 2023-01-27 2023-01-28 2023-01-29
2023 qingming 2023-04-05 2023-04-05
2023 labour_day 2023-04-29 2023-05-03 2023-04-23 2023-05-06
2023 dragon_boat 2023-06-22 2023-06-24 2023-06-25
2023 mid_autumn_national_day 2023-09-29 2023-10-06 2023-10-07 2023-10-08
2024 new_year 2024-01-01 2024-01-01
2024 spring_festival 2024-02-10 2024-02-17 2024-02-04 2024-02-18
2024 qingming 2024-04-04 2024-04-06 2024-04-07
2024 labour_day 2024-05-01 2024-05-05 2024-04-28 2024-05-11
2024 dragon_boat 2024-06-08 2024-06-10
2024 mid_autumn 2024-09-15 2024-09-17 2024-09-14
2024 national_day 2024-10-01 2024-10-07 2024-09-29 2024-10-12
2025 new_year 2025-01-01 2025-01-01
2025 spring_festival 2025-01-28 2025-02-04 2025-01-26 2025-02-08
2025 qingming 2025-04-04 2025-04-06
2025 labour_day 2025-05-01 2025-05-05 2025-04-27
2025 dragon_boat 2025-05-31 2025-06-02
2025 mid_autumn_national_day 2025-10-01 2025-10-08 2025-09-28 2025-10-11
2026 new_year 2026-01-01 2026-01-03 2026-01-04
2026 spring_festival 2026-02-15 2026-02-23 2026-02-14 2026-02-28
2026 qingming 2026-04-04 2026-04-06
2026 labour_day 2026-05-01 2026-05-05 2026-05-09
2026 dragon_boat 2026-06-19 2026-06-21
2026 mid_autumn 2026-09-25 2026-09-27
2026 national_day 2026-10-01 2026-10-07 2026-09-20 2026-10-10
2027 new_year 2027-01-01 2027-01-03
2027 spring_festival 2027-02-05 2027-02-10
2027 qingming 2027-04-03 2027-04-05
2027 labour_day 2027-05-01 2027-05-04
2027 dragon_boat 2027-06-09 2027-06-09
2027 mid_autumn 2027-09-15 2027-09-15
2027 national_day 2027-10-01 2027-10-05
"""

#: Notice years the table covers, and the ones that are provisional (no notice yet).
YEARS = range(2019, 2028)
PROVISIONAL = frozenset({2027})


@lru_cache(maxsize=1)
def official_windows() -> tuple[tuple[int, str, dt.date, dt.date, tuple[dt.date, ...]], ...]:
    """The table as ``(notice_year, festival, first, last, makeup_workdays)`` tuples."""
    out = []
    for line in _TABLE.strip().splitlines():
        year, key, first, last, *mk = line.split()
        out.append((int(year), key, dt.date.fromisoformat(first), dt.date.fromisoformat(last),
                    tuple(dt.date.fromisoformat(d) for d in mk)))
    return tuple(out)


@lru_cache(maxsize=1)
def _named() -> tuple[dict[dt.date, tuple[str, str]], frozenset[dt.date]]:
    days: dict[dt.date, tuple[str, str]] = {}
    makeup: set[dt.date] = set()
    for _year, key, first, last, mk in official_windows():
        n = (last - first).days + 1
        for k in range(n):
            d = first + dt.timedelta(days=k)
            days[d] = (key, f"{FESTIVALS[key]} day {k + 1}" if n > 1 else FESTIVALS[key])
        makeup.update(mk)
    return days, frozenset(makeup)


def china_holiday_names(years: range | list[int]) -> dict[dt.date, str]:
    """Every official day off in ``years`` (local dates) -> its name, e.g.
    ``Spring Festival day 3``; weekend days inside a window included."""
    ys = set(years)
    return {d: name for d, (_k, name) in _named()[0].items() if d.year in ys}


def china_days(years: range | list[int]) -> tuple[set[dt.date], set[dt.date]]:
    """Return ``(days_off, makeup_workdays)`` for the given calendar years (local dates).

    Years outside :data:`YEARS` have none (the table says what it covers)."""
    ys = set(years)
    days, makeup = _named()
    return {d for d in days if d.year in ys}, {d for d in makeup if d.year in ys}


#: Columns of :func:`calendar_features`, in order.
FEATURES = ("hour_sin", "hour_cos", "hour_of_week_sin", "hour_of_week_cos", "holiday", "makeup_workday",
            "day_off", "days_to_holiday")
HOLIDAY_HORIZON_DAYS = 30  # days_to_holiday saturates here


def calendar_features(ts: pd.DatetimeIndex, timezone: str = "Asia/Shanghai") -> np.ndarray:
    """Calendar features for the LSTM, one row per timestamp (local time of the series).

    Parameters
    ----------
    ts: tz-aware timestamps (UTC).
    timezone: IANA zone of the series; hours and dates are local.

    Returns
    -------
    float32 array of shape ``(len(ts), len(FEATURES))``: sin/cos of hour of day,
    sin/cos of hour of week, China public-holiday flag, make-up workday flag,
    day-off flag (a holiday, or a weekend day that is not a make-up workday), and
    days to the next holiday (0 on a holiday) divided by
    :data:`HOLIDAY_HORIZON_DAYS`, capped at 1.
    """
    local = ts.tz_convert(timezone)
    hour = local.hour.to_numpy() + local.minute.to_numpy() / 60.0
    dow = local.dayofweek.to_numpy()
    how = dow * 24 + hour
    years = sorted(set(local.year.tolist())) or [2020]
    off, makeup = china_days(years + [years[-1] + 1])
    dates = local.date
    hol = np.fromiter((d in off for d in dates), dtype=bool, count=len(dates))
    mk = np.fromiter((d in makeup for d in dates), dtype=bool, count=len(dates))
    day_off = hol | ((dow >= 5) & ~mk)
    days = np.asarray(dates, dtype="datetime64[D]")
    offs = np.array(sorted(off), dtype="datetime64[D]")
    if len(offs):
        k = np.searchsorted(offs, days, side="left")
        nxt = offs[np.minimum(k, len(offs) - 1)]
        dist = np.where(k < len(offs), (nxt - days).astype("timedelta64[D]").astype(float), HOLIDAY_HORIZON_DAYS)
    else:
        dist = np.full(len(days), float(HOLIDAY_HORIZON_DAYS))
    return np.column_stack(
        [
            np.sin(2 * np.pi * hour / 24),
            np.cos(2 * np.pi * hour / 24),
            np.sin(2 * np.pi * how / 168),
            np.cos(2 * np.pi * how / 168),
            hol.astype(float),
            mk.astype(float),
            day_off.astype(float),
            np.minimum(dist, HOLIDAY_HORIZON_DAYS) / HOLIDAY_HORIZON_DAYS,
        ]
    ).astype("float32")


def prophet_holidays(years: list[int], events: list[str] | tuple[str, ...] = ()) -> pd.DataFrame:
    """A Prophet ``holidays`` frame for China, with holiday windows and events.

    Columns ``holiday, ds, lower_window, upper_window`` (Prophet's format);
    ``ds`` are *local* dates, so the model must be given local-time ``ds``
    (:func:`local_naive`). Every day of every official window in ``years`` is
    a row, grouped into three effects: ``spring_festival``, ``golden_week``
    (National Day, with Mid-Autumn when they merge) and ``cn_holiday`` (the
    rest). The first day of a window gets ``lower_window=-1`` and the last
    ``upper_window=1``, for the travel days around it. Make-up workdays are
    *not* holidays: they are the regressor ``makeup_workday``
    (:func:`makeup_regressor`). ``events`` adds entries of :data:`CUSTOM_EVENTS`.

    Raises
    ------
    ValueError: an unknown custom event.
    """
    ys = set(years)
    group = {"spring_festival": "spring_festival", "national_day": "golden_week",
             "mid_autumn_national_day": "golden_week"}
    rows = []
    for _year, key, first, last, _mk in official_windows():
        n = (last - first).days + 1
        for k in range(n):
            d = first + dt.timedelta(days=k)
            if d.year in ys:
                rows.append({"holiday": group.get(key, "cn_holiday"), "ds": pd.Timestamp(d),
                             "lower_window": -1 if k == 0 else 0, "upper_window": 1 if k == n - 1 else 0})
    for ev in events:
        if ev not in CUSTOM_EVENTS:
            raise ValueError(f"unknown custom event {ev!r}; known: {sorted(CUSTOM_EVENTS)}")
        m, day, lo, up = CUSTOM_EVENTS[ev]
        for y in years:
            rows.append({"holiday": ev, "ds": pd.Timestamp(y, m, day), "lower_window": lo, "upper_window": up})
    return pd.DataFrame(rows, columns=["holiday", "ds", "lower_window", "upper_window"])


def local_naive(ts: pd.DatetimeIndex | pd.Series, timezone: str) -> pd.Series:
    """Tz-aware timestamps -> naive *local* wall-clock ``datetime64[ns]`` in ``timezone``.

    Prophet takes naive ``ds``; holiday dates are local days, so ``ds`` must be
    local wall-clock time for a holiday's effect to start at local midnight.
    (In a zone with daylight saving, the repeated autumn hour appears twice.)
    """
    idx = pd.DatetimeIndex(ts)
    if idx.tz is None:
        idx = idx.tz_localize("UTC")
    return pd.Series(idx.tz_convert(timezone).tz_localize(None).astype("datetime64[ns]"))


def makeup_regressor(ds: pd.Series, timezone: str | None = None) -> np.ndarray:
    """1.0 where the date of ``ds`` is a China make-up workday, else 0.0.

    ``ds``: naive local wall-clock times (:func:`local_naive`), or tz-aware
    timestamps, which are converted to ``timezone`` first.
    """
    idx = pd.DatetimeIndex(ds)
    if idx.tz is not None:
        idx = idx.tz_convert(timezone or "UTC").tz_localize(None)
    years = sorted(set(idx.year.tolist())) or [2020]
    _, makeup = china_days(years)
    return np.fromiter((d in makeup for d in idx.date), dtype=float, count=len(idx))


def event_name(v) -> str:
    """A ``forecast.events`` entry: a name of :data:`forecasting.calendar.CUSTOM_EVENTS` (YAML reads
    ``618`` as a number). Raises ValueError for anything else."""
    if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) in CUSTOM_EVENTS:
        return str(v)
    raise ValueError(f"not a known event; known: {', '.join(sorted(CUSTOM_EVENTS))}")
