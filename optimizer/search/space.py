"""Search spaces: the typed dimensions of each policy model, their grids and anchors.

Quantile choices are ordered (p50 < p90 < p95 < p99; ``none`` first for the
top-up), so they are searched as Integer indices: one ordinal dimension each
for the Gaussian process instead of a one-hot block. The grids are what
:func:`optimizer.search.policy_search.grid_scan` replays; the anchors are evaluated first by
every search (:func:`optimizer.search.policy_search.run_search`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from skopt.space import Categorical, Integer, Real

from optimizer.plan.policy import InferenceParams, TrainingParams
from optimizer.training.committed import committed_layer


@dataclass
class Space:
    """A named, typed search space and the policy model it builds.

    ``labels[name]``: an ordered choice (forecast quantiles) searched as an
    ``Integer`` index into its labels, so the Gaussian process sees one ordinal
    dimension (p50 < p90 < p95 < p99) instead of a one-hot block per label.
    ``safety(params) -> tuple``: larger is safer (more capacity held against a
    demand the tuning window did not show); it breaks ties, see :func:`pick_best`.
    ``grid``: values per dimension scanned by :func:`grid_scan` (``grid_skip(values)``
    drops redundant combinations).
    """

    dims: list
    build: Callable[[dict], object]
    fixed: dict = field(default_factory=dict)
    safety: Callable[[object], tuple] = lambda p: ()
    labels: dict[str, list[str]] = field(default_factory=dict)
    anchors: list[dict] = field(default_factory=list)
    grid: dict[str, list] = field(default_factory=dict)
    grid_skip: Callable[[dict], bool] = lambda v: False

    def grid_points(self) -> list[list]:
        """The deterministic scan (:func:`grid_scan`): every combination of ``grid``'s values
        (a dimension it leaves out takes its anchor's value, or its lower bound), clipped into
        the bounds, labels the bounds dropped left out, duplicates dropped, in a fixed order."""
        base = self.anchors[0] if self.anchors else {}
        axes = []
        for d in self.dims:
            vals = self.grid.get(d.name, [base.get(d.name, d.low if isinstance(d, (Real, Integer))
                                                   else d.categories[0])])
            if d.name in self.labels:
                vals = [v for v in vals if v in self.labels[d.name]] or [self.labels[d.name][0]]
            elif isinstance(d, Categorical):
                vals = [v for v in vals if v in d.categories] or [d.categories[0]]
            axes.append(vals)
        seen, pts = set(), []
        for combo in itertools.product(*axes):
            vals = dict(zip(self.names, combo))
            if self.grid_skip(vals):
                continue
            x = self.to_point(vals)
            key = tuple(x)
            if key not in seen:
                seen.add(key)
                pts.append(x)
        return pts

    def to_point(self, values: dict) -> list:
        """Policy values (labels for ordered choices) -> skopt point, clipped into the bounds
        (ValueError: a categorical value the bounds dropped)."""
        out = []
        for d in self.dims:
            v = values[d.name]
            if d.name in self.labels and isinstance(d, Integer):
                v = self.labels[d.name].index(v)
            elif isinstance(d, (Real, Integer)):
                v = type(d.low)(min(max(v, d.low), d.high))
            elif isinstance(d, Categorical) and v not in d.categories:
                raise ValueError(f"{d.name}: {v!r} is not one of {list(d.categories)}")
            out.append(v)
        return out

    def anchor_points(self) -> list[list]:
        """The anchors that lie in this space (a label the bounds dropped skips its anchor)."""
        pts = []
        for a in self.anchors:
            try:
                pts.append(self.to_point(a))
            except (KeyError, ValueError):
                continue
        return pts

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.dims]

    def to_params(self, x: list) -> object:
        """skopt point -> policy model (numpy scalars cast to int/float/str)."""
        vals = {}
        for d, v in zip(self.dims, x):
            if d.name in self.labels and isinstance(d, Integer):
                vals[d.name] = self.labels[d.name][int(v)]
            elif isinstance(d, Integer):
                vals[d.name] = int(v)
            elif isinstance(d, Real):
                vals[d.name] = float(v)
            else:
                vals[d.name] = str(v) if isinstance(v, (str, np.str_)) else v
        return self.build({**self.fixed, **vals})


def training_space(bounds: dict | None = None, price=None, interruption_rate: float = 0.01,
                   recovery_s: int = 1800) -> Space:
    """Training pool: reservation ratio, forecast quantile, daily headroom, spot
    fraction, and the hourly on-demand top-up (quantile, ``none`` included, and
    headroom); see :class:`optimizer.plan.policy.TrainingParams`. ``price`` (the GPU model's
    :class:`optimizer.book.prices.GpuPrice`): a book that caps spot or makes a reservation cheaper
    than spot adds the committed layer's reservation levels (:mod:`optimizer.training.committed`)."""
    b = {"reservation_ratio": (0.0, 1.5), "headroom": (0.8, 1.8), "spot_fraction": (0.0, 1.0),
         "quantile": ["p50", "p90", "p95", "p99"], "daily_rule": ["newsvendor", "max"],
         "daily_cap": ["none", "last_day_peak"],
         "topup_quantile": ["none", "p50", "p90", "p95", "p99", "c80", "c90", "c95"],
         "topup_headroom": (0.8, 1.5), **(bounds or {})}
    labels = {k: ordered_labels(b[k]) for k in ("quantile", "topup_quantile")}
    dims = [Real(*b["reservation_ratio"], name="reservation_ratio"),
            _choice(labels, "quantile"),
            Categorical(list(b["daily_rule"]), name="daily_rule"),
            Categorical(list(b["daily_cap"]), name="daily_cap"),
            Real(*b["headroom"], name="headroom"),
            Real(*b["spot_fraction"], name="spot_fraction"),
            _choice(labels, "topup_quantile"),
            Real(*b["topup_headroom"], name="topup_headroom")]
    return committed_layer(Space(dims, lambda v: TrainingParams(**v), safety=_training_safety, labels=labels,
                                 anchors=TRAINING_ANCHORS, grid=TRAINING_GRID,
                                 grid_skip=lambda v: _training_grid_skip(v, labels["quantile"][0])),
                           price, interruption_rate, recovery_s)


def _training_grid_skip(v: dict, first_quantile: str) -> bool:
    """Drop grid points that repeat another or scale a level that is already a quantile: a top-up
    with no forecast quantile (none, calibrated, n95) only at headroom 1; the empirical and calibrated
    daily rules (:mod:`optimizer.training.empirical`, :mod:`optimizer.training.calibrated_day`: levels in GPUs, no
    forecast quantile) only at headroom 1 and ``first_quantile`` (they read none)."""
    if v["topup_quantile"] in ("none", "c80", "c90", "c95", "a95", "n95") and v["topup_headroom"] != 1.0:
        return True
    return v["daily_rule"] in ("empirical", "calibrated") and (v["headroom"] != 1.0 or v["quantile"] != first_quantile)


# The deterministic scan over the training layers (grid_scan): every daily layer (quantile, rule,
# cap, headroom 0.8-1.2, on spot: spot_eff < on-demand, optimizer.training.newsvendor; the empirical rule of
# optimizer.training.empirical at headroom 1, where the bounds allow it) with every hourly top-up (none; a
# forecast quantile at headroom 0.8-1.5; a calibrated level of optimizer.training.calibrated, whose margin is
# already learnt, or the empirical n95, at headroom 1), no weekly reservation (with the default prices
# it never pays). The Gaussian-process refinement searches the rest (reservations, on-demand days).
# About 2,600 replays of the tuning window, 1-3 s. The model-free levels are not searched by default:
# picked on one tuning week among thousands of policies they lost on the evaluation week of the
# sample's bursty pools; they compete as the empirical peer (optimizer.rivals.peers), which must win by more
# than the days' noise (optimizer.rivals.judge) and is then exported as that policy (optimizer.rivals.expressed).
TRAINING_GRID = {"reservation_ratio": [0.0], "quantile": ["p50", "p90", "p95", "p99"],
                 "daily_rule": ["newsvendor", "max", "empirical", "calibrated"], "daily_cap": ["none", "last_day_peak"],
                 "headroom": [0.8, 0.9, 1.0, 1.1, 1.2],
                 "spot_fraction": [1.0],
                 "topup_quantile": ["none", "p50", "p90", "p95", "p99", "c80", "c90", "c95", "n95"],
                 "topup_headroom": [0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5]}


# Evaluated first by both searches, so the GP-vs-random comparison stays fair. The first is the
# cost-optimal layering before any search (optimizer.training.newsvendor): no weekly reservation (with spot at
# 0.4 and reserved at 0.6 x on-demand, optimizer.book.prices, reserving never pays), the day's p90
# newsvendor level on spot, the rest bought per hour from the p90 of the fresh forecast (optimizer.training.fresh_hour).
# The second is the earlier lean policy (the day's p90 max on spot). Uniform draws over seven
# parameters rarely land near them; the searches move away wherever the tuning window says so.
TRAINING_ANCHORS = [
    {"reservation_ratio": 0.0, "quantile": "p90", "daily_rule": "newsvendor", "daily_cap": "none", "headroom": 1.0,
     "spot_fraction": 1.0, "topup_quantile": "p90", "topup_headroom": 1.0},
    {"reservation_ratio": 0.0, "quantile": "p90", "daily_rule": "max", "daily_cap": "none", "headroom": 0.9,
     "spot_fraction": 1.0,
     "topup_quantile": "p95", "topup_headroom": 1.0},
]


# ordinal position of each choice (calibrated levels between the quantiles they usually fall between;
# n95, last value + q95 of the hour's rise, between c95 and p99)
_RANK = {"none": 0, "p50": 1, "c80": 1.5, "p90": 2, "c90": 2.5, "p95": 3, "c95": 3.5, "a95": 3.6, "n95": 3.75, "p99": 4}


def ordered_labels(choices) -> list[str]:
    """Quantile labels (``none`` first) in increasing order of the level they buy, duplicates
    dropped (the ranks above; a label without a rank goes last)."""
    return sorted(dict.fromkeys(str(c) for c in choices), key=lambda c: _RANK.get(c, len(_RANK)))


def _choice(labels: dict[str, list[str]], name: str):
    """One ordered choice as a dimension: an Integer index, or a Categorical when it has one label."""
    n = len(labels[name])
    return Integer(0, n - 1, name=name) if n > 1 else Categorical(labels[name], name=name)


def _training_safety(p: TrainingParams) -> tuple:
    """Reacting each hour beats not reacting; then the smallest weekly commitment (the one layer
    that cannot follow demand), higher quantiles, more headroom, less spot."""
    return (_RANK[p.topup_quantile], -p.reservation_ratio, _RANK[p.quantile], p.daily_cap == "none",
            p.topup_headroom, p.headroom, -p.spot_fraction)


def _inference_safety(p: InferenceParams) -> tuple:
    """Pre-scaling beats none; then a lower HPA target, a higher lookahead quantile, more min replicas,
    slower scale-down."""
    return (_RANK[p.prescale_quantile], -p.target_utilization, p.headroom_quantile, p.min_replicas,
            p.scale_down_window_s)


def inference_space(peak: float, bounds: dict | None = None, step_s: int = 300, lead_s: int = 900,
                    cover_s: int = 600) -> Space:
    """Inference service: the policy family (:data:`optimizer.engine.replay.INFERENCE_FAMILIES`), HPA target,
    windows, rate policies, min replicas, pre-scaling (``hpa``), level window and quantile
    (``lookahead``, :mod:`optimizer.inference.lookahead`).

    ``peak`` is the highest replicas needed in the history before the tuning
    window; ``max_replicas`` is fixed at ``ceil(2 * peak / 0.4)`` (room for
    twice the peak at the lowest target) unless bounds set it. ``step_s`` (the data's step),
    ``lead_s`` (:func:`optimizer.inference.lookahead.lead_steps` x step) and ``cover_s``
    (:func:`optimizer.inference.lookahead.cold_steps` + 1, x step) are fixed into every policy for the
    lookahead family's export.
    """
    hi_min = max(2, int(math.ceil(peak)))
    b = {"target_utilization": (0.4, 0.95), "scale_up_window_s": (0, 600), "scale_down_window_s": (0, 3600),
         "scale_up_percent": (20, 500), "scale_down_percent": (5, 100), "min_replicas": (1, hi_min),
         "prescale_lead_s": (0, 3600), "prescale_quantile": ["none", "p50", "p90", "p95"],
         "family": ["hpa", "lookahead"], "level_window_s": (0, 3600), "headroom_quantile": (0.5, 0.99),
         **(bounds or {})}
    dims = [Real(*b["target_utilization"], name="target_utilization"),
            Integer(*b["scale_up_window_s"], name="scale_up_window_s"),
            Integer(*b["scale_down_window_s"], name="scale_down_window_s"),
            Integer(*b["scale_up_percent"], name="scale_up_percent"),
            Integer(*b["scale_down_percent"], name="scale_down_percent"),
            Integer(*b["min_replicas"], name="min_replicas"),
            Integer(*b["prescale_lead_s"], name="prescale_lead_s"),
            Categorical(list(b["prescale_quantile"]), name="prescale_quantile"),
            Categorical(list(b["family"]), name="family"),
            Integer(*b["level_window_s"], name="level_window_s"),
            Real(*b["headroom_quantile"], name="headroom_quantile")]
    max_rep = int(b.get("max_replicas", max(2, math.ceil(2 * max(peak, 1) / 0.4))))
    return Space(dims, lambda v: InferenceParams(**v), fixed={"max_replicas": max_rep, "period_s": 60,
                                                                "data_step_s": int(step_s),
                                                                "lookahead_lead_s": int(lead_s),
                                                                "lookahead_cover_s": int(cover_s)},
                 safety=_inference_safety, anchors=INFERENCE_ANCHORS, grid=INFERENCE_GRID,
                 grid_skip=_inference_grid_skip)


def _inference_grid_skip(v: dict) -> bool:
    """Drop grid points that repeat another: each family scans only its own dimensions (the others
    at the first anchor's values; :data:`INFERENCE_GRID`)."""
    if v["family"] == "lookahead":
        return (v["prescale_quantile"] != "none" or v["prescale_lead_s"] != 600
                or v["target_utilization"] != LOOKAHEAD_TARGET)
    return (v["prescale_quantile"] == "none" and v["prescale_lead_s"] != 600) or \
        v["level_window_s"] != INFERENCE_ANCHORS[0]["level_window_s"] or \
        v["headroom_quantile"] != INFERENCE_ANCHORS[0]["headroom_quantile"]


# Evaluated first, as TRAINING_ANCHORS: the Kubernetes HPA defaults (scale up at once, scale down
# after a 300 s window, 100 % per period) at an 80 % target, pre-scaled 10 minutes ahead (more than
# the metrics lag plus the cold start, optimizer.engine.replay) from the forecast's p90; then the lookahead
# family (optimizer.inference.lookahead) at the 0.85 quantile of its errors over a 15-minute level.
INFERENCE_ANCHORS = [
    {"target_utilization": 0.8, "scale_up_window_s": 0, "scale_down_window_s": 300, "scale_up_percent": 100,
     "scale_down_percent": 100, "min_replicas": 1, "prescale_lead_s": 600, "prescale_quantile": "p90",
     "family": "hpa", "level_window_s": 900, "headroom_quantile": 0.85},
    {"target_utilization": 0.95, "scale_up_window_s": 0, "scale_down_window_s": 0, "scale_up_percent": 100,
     "scale_down_percent": 100, "min_replicas": 1, "prescale_lead_s": 600, "prescale_quantile": "none",
     "family": "lookahead", "level_window_s": 900, "headroom_quantile": 0.85},
]
# The lookahead family's utilisation trigger (the reactive floor) sits at the top of the target's range:
# its quantile holds the headroom
LOOKAHEAD_TARGET = 0.95
# The deterministic scan (grid_scan) around those anchors. HPA: target, pre-scaling quantile and lead
# (5 or 10 minutes: beyond the metrics lag plus the cold start), scale-down window (~100 replays).
# Lookahead: level window (one step, 15 or 30 minutes), error quantile 0.7-0.95 in steps of 0.025, scale-down
# window (99). The scan scores a point by its worst quantile neighbour, so the step is what it pays above the
# least quantile that meets the target: at 0.05 it chose 0.95 on infer/nasa-http (regret 1.34 on the evaluation
# week, the reactive peer won), at 0.025 0.875 (1.285). Chosen after seeing those figures.
INFERENCE_GRID = {"target_utilization": [0.6, 0.7, 0.8, 0.9, 0.95], "prescale_quantile": ["none", "p50", "p90", "p95"],
                  "prescale_lead_s": [300, 600], "scale_down_window_s": [0, 300, 900],
                  "family": ["hpa", "lookahead"], "level_window_s": [0, 900, 1800],
                  "headroom_quantile": [0.7, 0.725, 0.75, 0.775, 0.8, 0.825, 0.85, 0.875, 0.9, 0.925, 0.95]}
