"""The Kubernetes HorizontalPodAutoscaler algorithm (``autoscaling/v2``).

Follows the Kubernetes documentation "Horizontal Pod Autoscaling"
(kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/) and the
controller's ``normalizeDesiredReplicasWithBehaviors``:

1. ``desiredReplicas = ceil(currentReplicas * currentMetricValue /
   desiredMetricValue)``, skipped (kept at current) when the ratio is within the
   tolerance 0.1 of 1.0. With several metrics the largest proposal wins.
2. Stabilisation: the recommendation for scale up is the *lowest*
   recommendation within ``scaleUp.stabilizationWindowSeconds``, for scale down
   the *highest* within ``scaleDown.stabilizationWindowSeconds``.
3. Rate limits: each policy (``Pods`` or ``Percent`` per ``periodSeconds``)
   bounds the change relative to the replica count at the start of its period;
   ``selectPolicy`` ``Max`` takes the policy allowing the largest change, ``Min``
   the smallest, ``Disabled`` forbids that direction.
4. The result is clamped to ``[minReplicas, maxReplicas]``.

Defaults when ``behavior`` is not set (same page): scale down — window 300 s,
``Percent 100`` per 15 s; scale up — window 0 s, ``Percent 100`` and ``Pods 4``
per 15 s, ``selectPolicy: Max``.

The controller syncs every 15 s (``--horizontal-pod-autoscaler-sync-period``);
the replay evaluates it once per data step. When a policy period is shorter
than the step, the policy is compounded ``step // periodSeconds`` times within
that step (what consecutive syncs with a steady metric would allow). Likewise a
recommendation made at a data step stands for every sync until the next step
(the metric holds its value for the step): it is recorded at the time of the
last of those syncs, ``now + step - sync``, so a stabilisation window counts it
as the controller would. A 300 s scale-down window on 5-minute data therefore
holds the previous step's recommendation (the controller's last sync on it was
15 s before the window's edge); counted at ``now`` it would be a no-op.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

TOLERANCE = 0.1


@dataclass(frozen=True)
class ScalingPolicy:
    """One HPA scaling policy: ``type`` Pods or Percent, ``value``, ``periodSeconds`` (1–1800)."""

    type: Literal["Pods", "Percent"]
    value: int
    period_seconds: int


@dataclass(frozen=True)
class ScalingRules:
    """``behavior.scaleUp`` or ``behavior.scaleDown``."""

    stabilization_window_seconds: int
    policies: tuple[ScalingPolicy, ...]
    select_policy: Literal["Max", "Min", "Disabled"] = "Max"


DEFAULT_SCALE_UP = ScalingRules(0, (ScalingPolicy("Percent", 100, 15), ScalingPolicy("Pods", 4, 15)), "Max")
DEFAULT_SCALE_DOWN = ScalingRules(300, (ScalingPolicy("Percent", 100, 15),), "Max")


@dataclass
class HPA:
    """Stateful HPA controller for one target.

    Times are seconds; ``step(now, proposals)`` is called once per sync.
    """

    min_replicas: int = 1
    max_replicas: int = 100
    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN
    sync_seconds: int = 15
    tolerance: float = TOLERANCE
    recommendations: deque = field(default_factory=deque)  # (time, replicas)
    events: deque = field(default_factory=deque)  # (time, change)

    def raw_desired(self, current: int, ratio: float) -> int:
        """Step 1: the ratio rule with tolerance. ``ratio`` = metric / target."""
        if not math.isfinite(ratio):
            return current
        if abs(ratio - 1.0) <= self.tolerance:
            return current
        return int(math.ceil(current * ratio - 1e-9))

    def _stabilize(self, now: float, current: int, desired: int, held: float = 0.0) -> int:
        """Step 2 (module docstring): the windows' lowest (up) and highest (down) recommendation.
        ``desired`` is recorded at ``now + held``, the last sync that would make it before the next
        call (``held`` = the step less one sync period; 0 when the caller steps once per sync)."""
        up_w, down_w = self.scale_up.stabilization_window_seconds, self.scale_down.stabilization_window_seconds
        horizon = max(up_w, down_w)
        while self.recommendations and self.recommendations[0][0] < now - horizon:
            self.recommendations.popleft()
        up_rec = down_rec = desired
        for t, r in self.recommendations:
            if t > now - up_w:
                up_rec = min(up_rec, r)
            if t > now - down_w:
                down_rec = max(down_rec, r)
        self.recommendations.append((now + held, desired))
        stabilized = current
        if stabilized < up_rec:
            stabilized = up_rec
        if stabilized > down_rec:
            stabilized = down_rec
        return stabilized

    def _period_change(self, now: float, period: int) -> tuple[int, int]:
        added = deleted = 0
        for t, c in self.events:
            if t > now - period:
                if c > 0:
                    added += c
                else:
                    deleted -= c
        return added, deleted

    def _limit(self, now: float, current: int, rules: ScalingRules, up: bool, step_seconds: int) -> int:
        best = None
        for p in rules.policies:
            added, deleted = self._period_change(now, p.period_seconds)
            start = current - added + deleted
            k = (max(1, step_seconds // max(p.period_seconds, self.sync_seconds)) if p.period_seconds < step_seconds
                 else 1)
            if up:
                v = start
                for _ in range(min(k, 64)):
                    v = v + p.value if p.type == "Pods" else math.ceil(v * (1 + p.value / 100.0))
                    if v >= self.max_replicas:
                        break
            else:
                v = start
                for _ in range(min(k, 64)):
                    v = v - p.value if p.type == "Pods" else int(v * (1 - p.value / 100.0))
                    if v <= self.min_replicas:
                        break
            if best is None:
                best = v
            elif (rules.select_policy == "Max") == up:
                best = max(best, v)
            else:
                best = min(best, v)
        return current if best is None else best

    def step(self, now: float, current: int, ratios: list[float], step_seconds: int | None = None) -> int:
        """One sync: returns the new replica count.

        Parameters
        ----------
        now: seconds since an arbitrary epoch.
        current: current replicas (spec, including not-yet-ready pods).
        ratios: per metric, ``currentMetricValue / desiredMetricValue``.
        step_seconds: time until the next sync (default ``sync_seconds``).
        """
        step_seconds = step_seconds or self.sync_seconds
        current = max(current, 1)
        proposals = [self.raw_desired(current, r) for r in ratios] or [current]
        desired = max(proposals)
        desired = min(max(desired, self.min_replicas), self.max_replicas)
        desired = self._stabilize(now, current, desired, max(step_seconds - self.sync_seconds, 0))
        if desired > current:
            if self.scale_up.select_policy == "Disabled":
                desired = current
            else:
                limit = max(self._limit(now, current, self.scale_up, True, step_seconds), current)
                desired = min(desired, limit, self.max_replicas)
        elif desired < current:
            if self.scale_down.select_policy == "Disabled":
                desired = current
            else:
                limit = min(self._limit(now, current, self.scale_down, False, step_seconds), current)
                desired = max(desired, limit, self.min_replicas)
        horizon = max([p.period_seconds for p in self.scale_up.policies + self.scale_down.policies] or [0])
        while self.events and self.events[0][0] <= now - horizon:
            self.events.popleft()
        if desired != current:
            self.events.append((now, desired - current))
        return desired
