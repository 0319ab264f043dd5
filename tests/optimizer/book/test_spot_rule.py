"""One rule for spot in the replay and the exported plan: where spot (with its interruptions) costs no less
than on-demand, both buy the day's flexible GPUs on demand whatever spot_fraction says, so the plan never
asks for spot the replayed figures did not buy; where spot pays, both buy spot_fraction of it on spot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from forecasting.types import QCOLS
from optimizer.book.prices import GpuPrice
from optimizer.engine.replay import replay_training
from optimizer.plan.capacity import capacity_plan
from optimizer.plan.policy import TrainingParams
from optimizer.training.newsvendor import critical_ratios, spot_pays
from tests.optimizer.engine.test_replay import _flat
from tests.optimizer.engine.test_replay import inp as replay_inp

CHEAP = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.4)
DEAR = GpuPrice(on_demand=1.0, reserved=0.6, spot=1.3)
# below on-demand by its price, above it once interruptions are paid (0.2 per hour x 30 min lost)
NEAR = GpuPrice(on_demand=1.0, reserved=0.6, spot=0.95, interruption_rate=0.2, recovery_s=1800)
PARAMS = {"reservation_ratio": 0.5, "quantile": "p90", "headroom": 1.0, "spot_fraction": 1.0,
          "topup_quantile": "none", "daily_rule": "max"}


def _plan(price: GpuPrice) -> dict:
    issued = pd.Timestamp("2024-01-07 23:55", tz="UTC")
    ts = pd.date_range(issued + pd.Timedelta("5min"), periods=288 * 7, freq="5min", tz="UTC")
    final = pd.DataFrame({"series_id": "s", "tier": "combined", "issued_at": issued, "timestamp": ts,
                          **{q: 12.0 for q in QCOLS}})
    weekly = final.assign(tier="weekly", **{q: 8.0 for q in QCOLS})
    hist = pd.DataFrame({"timestamp": ts - pd.Timedelta("7D"), "value": 12.0})
    share = critical_ratios(price, 0.01, 1800)["spot"]
    return capacity_plan("training", PARAMS, final, weekly, history=hist, spot_share=share, price=price)


def _replay(price: GpuPrice) -> dict:
    n = 2016
    i = _flat(replay_inp(np.full(n, 12.0)), 8, 12)
    i.price = price
    return replay_training(i, TrainingParams(**PARAMS), 0.01, 1800)[1]


@pytest.mark.parametrize("price,pays", [(CHEAP, True), (DEAR, False), (NEAR, False)])
def test_plan_and_replay_buy_spot_by_the_same_rule(price, pays):
    assert spot_pays(price, 0.01, 1800) is pays
    plan, s = _plan(price), _replay(price)
    assert (plan["spot_gpus"] > 0) == pays and bool(s["spot"].sum() > 0) == pays
    day_flex = plan["spot_gpus"] + plan["on_demand_gpus"]
    assert day_flex == 8  # 12 GPUs a day over a reservation of 4
    assert np.allclose(s["spot"] + s["on_demand"], day_flex)
    if not pays:
        assert plan["on_demand_gpus"] == 8 and np.allclose(s["on_demand"], 8)
