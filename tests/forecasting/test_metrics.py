"""forecasting/metrics.py on hand-computed cases (each would catch a broken formula)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from forecasting import metrics


def test_seasonal_scale_uses_the_seasonal_lag():
    y = np.arange(8.0)  # lag-4 differences are 4, lag-1 differences are 1
    assert metrics.seasonal_scale(y, 4) == 4.0
    assert metrics.seasonal_scale(y, 1) == 1.0


def test_seasonal_scale_falls_back_to_lag_1_then_1():
    assert metrics.seasonal_scale(np.array([0.0, 2.0, 0.0, 2.0]), 2) == 2.0  # lag-2 differences all 0
    assert metrics.seasonal_scale(np.array([5.0, 5.0, 5.0]), 2) == 1.0  # flat: finite MASE
    assert metrics.seasonal_scale(np.array([1.0, np.nan, 3.0, 4.0, 9.0]), 2) == pytest.approx((2 + 6) / 2)


def test_mase_divides_the_mae_by_the_scale():
    assert metrics.mase(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]), 2.0) == pytest.approx(1 / 3)
    assert metrics.mase(np.array([1.0, np.nan]), np.array([3.0, 1.0]), 4.0) == pytest.approx(0.5)
    assert math.isnan(metrics.mase(np.array([]), np.array([]), 1.0))


def test_coverage_is_the_share_at_or_below_the_quantile():
    assert metrics.coverage(np.array([1.0, 2.0, 3.0, 4.0]), np.full(4, 2.0)) == 0.5
    assert metrics.coverage(np.array([1.0, np.nan, 5.0]), np.array([1.0, 0.0, 4.0])) == 0.5
    assert math.isnan(metrics.coverage(np.array([np.nan]), np.array([1.0])))


def test_pinball_loss_is_asymmetric():
    assert metrics.pinball_loss(10.0, 8.0, 0.9) == pytest.approx(1.8)  # under-forecast: q x error
    assert metrics.pinball_loss(10.0, 12.0, 0.9) == pytest.approx(0.2)  # over-forecast: (1 - q) x error
    q = np.array([[10.0, 10.0, 10.0, 10.0]])
    assert metrics.pinball(np.array([10.0]), q) == 0.0


def test_smape_and_idle_ratio():
    assert metrics.smape(np.array([1.0, 0.0]), np.array([3.0, 0.0])) == pytest.approx(50.0)  # 100 and 0/0 = 0
    assert metrics.idle_ratio(np.array([1.0, 1.0]), np.array([2.0, 1.0])) == pytest.approx(1 / 3)
    assert metrics.idle_ratio(np.array([1.0]), np.array([0.0])) == 0.0


def test_idle_ratio_counts_only_capacity_above_demand():
    # step 1 is short by 3 GPUs (unmet demand, not idle capacity); step 2 holds 5 idle GPUs:
    # sum(max(p - a, 0)) / sum(p) = (0 + 5) / (2 + 10); |p - a| would count the shortfall too: 8 / 12
    demand, provisioned = np.array([5.0, 5.0]), np.array([2.0, 10.0])
    assert metrics.idle_ratio(demand, provisioned) == pytest.approx(5 / 12)
    # a policy that is short everywhere holds nothing idle
    assert metrics.idle_ratio(np.array([4.0, 6.0]), np.array([3.0, 6.0])) == 0.0
