"""The accuracy targets (benchmarks.accuracy_targets) are read from a backtest document as its docstring states them."""

from benchmarks.accuracy_targets import targets


def _row(mase: float, cov: float = 0.95, n: int = 100) -> dict:
    return {"mase": mase, "coverage_p95": cov, "n": n}


def _series(comb: dict, peers: dict, members: dict | None = None) -> dict:
    horizons = {}
    for band, c in comb.items():
        horizons[band] = {"combined": _row(*c), **{m: _row(v) for m, v in peers.get(band, {}).items()}}
    return {"horizons": horizons, "members": members or {}}


def _doc(series: dict) -> dict:
    return {"series": series}



def test_a_combination_ten_percent_behind_its_best_member_misses_and_is_named():
    doc = _doc({"train/a": _series({"24h": (1.20,)}, {"24h": {"naive": 1.3, "daily": 1.0}}),
                "train/b": _series({"24h": (0.90,)}, {"24h": {"naive": 1.0, "daily": 0.95}})})
    out = {name: (met, fig) for name, met, fig in targets(doc, {})}
    met, fig = out["no series-band worse than its own best member by more than 10%"]
    assert not met and "a 24h 1.20 (daily)" in fig and "1 of 2" in fig
    doc["series"]["train/a"]["horizons"]["24h"]["combined"]["mase"] = 1.05
    out = {name: (met, fig) for name, met, fig in targets(doc, {})}
    assert out["no series-band worse than its own best member by more than 10%"][0]


def test_median_to_best_peer_uses_the_issue_thresholds_and_names_the_worst_series():
    doc = _doc({f"train/s{i}": _series({"24h": (r,)}, {"24h": {"naive": 1.0, "prophet": 2.0}})
                for i, r in enumerate([0.90, 0.94, 1.30])})
    out = {name: (met, fig) for name, met, fig in targets(doc, {})}
    met, fig = out["24h: median MASE(combined) / best peer <= 0.95"]
    assert met and fig.startswith("0.940 over 3 series") and "worst 1.300 (train/s2)" in fig


def test_an_hourly_tier_that_copies_naive_does_not_count_as_carrying_weight():
    w = {"1h:30min-1h": {"hourly": 0.5, "naive": 0.5}}
    copy = _series({"1h": (1.0,)}, {"1h": {"naive": 1.0, "hourly": 1.0}}, w)
    own = _series({"1h": (0.9,)}, {"1h": {"naive": 1.0, "hourly": 0.85}}, w)
    out = {name: (met, fig) for name, met, fig in targets(_doc({"a": copy, "b": copy, "c": own}), {})}
    met, fig = out["1h: the hourly tier carries weight, and is not naive, on >= 1/3 of the series"]
    assert met and fig.startswith("1 of 3 (c)") and "weight >= 0.05 on 3" in fig
    out = {name: (met, fig) for name, met, fig in targets(_doc({"a": copy, "b": copy, "c": copy, "d": own}), {})}
    assert not out["1h: the hourly tier carries weight, and is not naive, on >= 1/3 of the series"][0]


def test_coverage_counts_only_series_bands_with_enough_rows_and_boundary_counts_any_excess():
    doc = _doc({"a": _series({"1h": (1.0, 0.99, 3), "24h": (1.0, 0.95), "7d": (1.0, 0.93)}, {}),
                "b": _series({"24h": (1.0, 0.95), "7d": (1.0, 0.85)}, {})})
    out = {name: (met, fig) for name, met, fig in targets(doc, {"a": (10, 0, 0.0), "b": (10, 1, 0.4)})}
    assert out["p95 coverage in [0.90, 0.98] on >= 75% of series-bands with >= 20 rows"] == (True, "3 of 4")
    met, fig = out["boundary: the combined p50 steps by no more than the largest member step, every series"]
    assert not met and fig == "1 of 2 series exceed"
