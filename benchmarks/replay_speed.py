"""Benchmark: replay simulator throughput (simulated 5-minute steps per second).

Run: ``python -m benchmarks replay``

Replays 30 days of 5-minute demand (8,640 steps) of one real series from the
embedded sample: the vectorised training replay, and the HPA replay of an
inference service (a per-step controller), each against a plain-Python
per-step loop of the same training accounting, measured in the same run.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from benchmarks import common
from forecasting.types import QCOLS
from optimizer.book.prices import default_price_book
from optimizer.engine.replay import replay_inference, replay_training
from optimizer.engine.replay_core import ReplayInput
from optimizer.plan.policy import InferenceParams, TrainingParams

STEPS = 30 * 288


def series(sid: str) -> np.ndarray:
    h = common.load_history(series=[sid]).frame
    v = h.loc[h["series_id"] == sid, "value"].to_numpy()
    return np.resize(v, STEPS).astype(float)


def loop_training(d, reserved, od, spot, price) -> float:
    """The same accounting as a plain per-step Python loop (the baseline)."""
    cost = cov = 0.0
    for i in range(len(d)):
        cap = reserved[i] + od[i] + spot[i]
        cost += (reserved[i] * price.reserved + od[i] * price.on_demand + spot[i] * price.spot) / 12
        cov += cap >= d[i]
    return cost


def timeit(fn, n=20) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main(argv: list[str] | None = None) -> None:
    common.parser(__doc__, "replay").parse_args(argv)  # no options: --help, and an error for any other
    price = default_price_book()["default"]
    times = pd.date_range("2020-05-01", periods=STEPS, freq="5min", tz="UTC")
    d = series("train/vc6YE")
    inp = ReplayInput(times=times, demand=d, step_s=300, price=price)
    for q, z in zip(QCOLS, (1.0, 1.1, 1.15, 1.3)):
        inp.week_mean[q] = np.full(STEPS, d.mean() * z)
        inp.day_max[q] = np.full(STEPS, d.max() * z)
        inp.day_level[q] = np.full(STEPS, d.max() * z * 0.8)
    p = TrainingParams(reservation_ratio=0.8, quantile="p90", headroom=1.1, spot_fraction=0.5)
    t_vec = timeit(lambda: replay_training(inp, p, 0.01, 1800, False, 0))
    _, s = replay_training(inp, p, 0.01, 1800, False, 0)
    t_loop = timeit(lambda: loop_training(d, s["reserved"], s["on_demand"], s["spot"], price), n=3)
    di = series("infer/nasa-http")
    inf = ReplayInput(times=times, demand=di, step_s=300, price=price)
    ip = InferenceParams(target_utilization=0.7, min_replicas=2, max_replicas=200, scale_down_window_s=300)
    t_hpa = timeit(lambda: replay_inference(inf, ip, 90), n=3)
    print(f"steps per replay: {STEPS} (30 days of 5-minute data)")
    print(f"training replay (numpy)      : {t_vec * 1e3:8.2f} ms  {STEPS / t_vec:12,.0f} steps/s")
    print(f"training loop (plain Python) : {t_loop * 1e3:8.2f} ms  {STEPS / t_loop:12,.0f} steps/s  (baseline)")
    print(f"inference HPA replay         : {t_hpa * 1e3:8.2f} ms  {STEPS / t_hpa:12,.0f} steps/s")
    print(f"ratio numpy / loop           : {t_loop / t_vec:8.1f}x faster")

