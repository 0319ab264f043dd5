"""Bayesian policy search with scikit-optimize, and random search with the same budget.

Objective (minimised), in USD::

    objective = cost_usd + penalty * 100 * max(0, coverage_target - coverage) * reference_cost

``reference_cost`` is what serving the window's mean demand exactly, on
demand, would cost; ``penalty`` (default 0.5) is the share of it charged per
percentage point of coverage below the target (default 0.95). With these
defaults missing the target by one point costs half a window of ideal
capacity, so the search treats the target as a near-hard constraint and
minimises cost among policies that meet it.

``skopt.gp_minimize`` is seeded; repeated points are answered from a cache
(so "The objective has been evaluated at this point before" never re-runs or
crashes a replay), and skopt's numpy integer and string values are cast to
the types the simulator's pydantic models expect.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from skopt import dummy_minimize, gp_minimize
from skopt.space import Categorical, Integer, Real
from skopt.space import Space as SkSpace
from skopt.utils import cook_estimator

from optimizer.policy import InferenceParams, Metrics, TrainingParams


@dataclass
class Space:
    """A named, typed search space and the policy model it builds."""

    dims: list
    build: Callable[[dict], object]
    fixed: dict = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dims]

    def to_params(self, x: list) -> object:
        """skopt point -> policy model (numpy scalars cast to int/float/str)."""
        vals = {}
        for d, v in zip(self.dims, x):
            if isinstance(d, Integer):
                vals[d.name] = int(v)
            elif isinstance(d, Real):
                vals[d.name] = float(v)
            else:
                vals[d.name] = str(v) if isinstance(v, (str, np.str_)) else v
        return self.build({**self.fixed, **vals})


def training_space(bounds: dict | None = None) -> Space:
    """Training pool: reservation ratio, forecast quantile, daily headroom, spot fraction."""
    b = {"reservation_ratio": (0.0, 1.5), "headroom": (0.8, 1.8), "spot_fraction": (0.0, 1.0),
         "quantile": ["p50", "p90", "p95", "p99"], **(bounds or {})}
    dims = [Real(*b["reservation_ratio"], name="reservation_ratio"),
            Categorical(list(b["quantile"]), name="quantile"),
            Real(*b["headroom"], name="headroom"),
            Real(*b["spot_fraction"], name="spot_fraction")]
    return Space(dims, lambda v: TrainingParams(**v))


def inference_space(peak: float, bounds: dict | None = None) -> Space:
    """Inference service: HPA target, windows, rate policies, min replicas, pre-scaling.

    ``peak`` is the highest replicas needed in the history before the tuning
    window; ``max_replicas`` is fixed at ``ceil(2 * peak / 0.4)`` (room for
    twice the peak at the lowest target) unless bounds set it.
    """
    hi_min = max(2, int(math.ceil(peak)))
    b = {"target_utilization": (0.4, 0.95), "scale_up_window_s": (0, 600), "scale_down_window_s": (0, 3600),
         "scale_up_percent": (20, 500), "scale_down_percent": (5, 100), "min_replicas": (1, hi_min),
         "prescale_lead_s": (0, 3600), "prescale_quantile": ["none", "p50", "p90", "p95"], **(bounds or {})}
    dims = [Real(*b["target_utilization"], name="target_utilization"),
            Integer(*b["scale_up_window_s"], name="scale_up_window_s"),
            Integer(*b["scale_down_window_s"], name="scale_down_window_s"),
            Integer(*b["scale_up_percent"], name="scale_up_percent"),
            Integer(*b["scale_down_percent"], name="scale_down_percent"),
            Integer(*b["min_replicas"], name="min_replicas"),
            Integer(*b["prescale_lead_s"], name="prescale_lead_s"),
            Categorical(list(b["prescale_quantile"]), name="prescale_quantile")]
    max_rep = int(b.get("max_replicas", max(2, math.ceil(2 * max(peak, 1) / 0.4))))
    return Space(dims, lambda v: InferenceParams(**v), fixed={"max_replicas": max_rep, "period_s": 60})


def objective_value(m: Metrics, coverage_target: float, reference_cost: float, penalty: float) -> float:
    """Cost plus the coverage penalty (module docstring)."""
    cov = 0.0 if not math.isfinite(m.coverage) else m.coverage
    return float(m.cost_usd + penalty * 100.0 * max(0.0, coverage_target - cov) * reference_cost)


@dataclass
class SearchResult:
    """Best policy of one search, and the trial log (one dict per evaluation:
    ``method, trial, params, objective, cost_usd, coverage, idle_ratio, seconds``)."""

    method: str
    best_params: object
    best_objective: float
    best_metrics: Metrics
    trials: list[dict]


def run_search(evaluate: Callable[[object], Metrics], space: Space, n_calls: int, seed: int,
               coverage_target: float, reference_cost: float, penalty: float = 0.5,
               method: str = "gp", progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Minimise the objective over ``space`` with ``gp`` (``skopt.gp_minimize``)
    or ``random`` (``skopt.dummy_minimize``), ``n_calls`` evaluations, seeded.

    ``evaluate(params) -> Metrics`` replays the policy on the tuning window.
    """
    cache: dict[tuple, tuple[float, Metrics]] = {}
    trials: list[dict] = []

    def f(x):
        key = tuple(round(v, 9) if isinstance(v, float) else v for v in x)
        params = space.to_params(x)
        t0 = time.perf_counter()
        if key in cache:
            val, m = cache[key]
        else:
            m = evaluate(params)
            val = objective_value(m, coverage_target, reference_cost, penalty)
            cache[key] = (val, m)
        trials.append({"method": method, "trial": len(trials), "params": params.model_dump(), "objective": val,
                       "cost_usd": m.cost_usd, "coverage": m.coverage, "idle_ratio": m.idle_ratio,
                       "seconds": time.perf_counter() - t0})
        if progress:
            progress(len(trials), n_calls)
        return val

    n_init = max(2, min(10, n_calls // 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "gp":
            # one optimiser start per GP fit (skopt's default restarts it twice more) and a sampled
            # acquisition: the same Bayesian loop at a third of the cost on two cores
            gp = cook_estimator("GP", space=SkSpace(space.dims), random_state=seed, noise="gaussian",
                                n_restarts_optimizer=0)
            res = gp_minimize(f, space.dims, base_estimator=gp, n_calls=n_calls, n_initial_points=n_init,
                              random_state=seed, n_points=2000, acq_optimizer="sampling")
        elif method == "random":
            res = dummy_minimize(f, space.dims, n_calls=n_calls, random_state=seed)
        else:
            raise ValueError(f"unknown search method {method!r}; use 'gp' or 'random'")
    best = space.to_params(res.x)
    key = tuple(round(v, 9) if isinstance(v, float) else v for v in res.x)
    val, m = cache[key]
    return SearchResult(method, best, val, m, trials)
