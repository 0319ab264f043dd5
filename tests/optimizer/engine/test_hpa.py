"""The HPA algorithm against the worked examples of the Kubernetes documentation
"Horizontal Pod Autoscaling" (kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/)."""

from __future__ import annotations

from optimizer.engine.hpa_controller import DEFAULT_SCALE_UP, HPA, ScalingPolicy, ScalingRules

NO_WINDOW_DOWN = ScalingRules(0, (ScalingPolicy("Percent", 100, 15),), "Max")


def test_ratio_rule_doubles_and_halves():
    # "if the current metric value is 200m, and the desired value is 100m, the number of replicas will be doubled"
    h = HPA(min_replicas=1, max_replicas=100, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 4, [200 / 100]) == 8
    # "If the current value is instead 50m, you'll halve the number of replicas"
    h = HPA(min_replicas=1, max_replicas=100, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 8, [50 / 100]) == 4


def test_tolerance_skips_small_ratios():
    h = HPA(min_replicas=1, max_replicas=100, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 10, [1.05]) == 10  # within 0.1: no action
    assert h.step(15, 10, [0.95]) == 10
    assert h.step(30, 10, [1.2]) == 12  # ceil(10 * 1.2)


def test_largest_metric_proposal_wins():
    h = HPA(min_replicas=1, max_replicas=100)
    assert h.step(0, 10, [0.5, 1.5]) == 15


def test_min_and_max_replicas():
    h = HPA(min_replicas=3, max_replicas=6, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 4, [10.0]) == 6
    h = HPA(min_replicas=3, max_replicas=6, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 5, [0.01]) == 3


def test_scale_down_stabilization_takes_highest_recommendation_in_window():
    # default scaleDown window 300 s: a brief dip does not remove replicas
    h = HPA(min_replicas=1, max_replicas=100)
    assert h.step(0, 10, [1.0]) == 10
    assert h.step(60, 10, [0.5]) == 10  # recommendation 5, but 10 was recommended within 300 s
    assert h.step(120, 10, [0.6]) == 10
    # once the 10-recommendation at t=0 (and ratio-1.0 at t=0) leaves the window, the highest left (6) wins
    assert h.step(301, 10, [0.5]) == 6


def test_scale_up_stabilization_takes_lowest_recommendation_in_window():
    up = ScalingRules(120, (ScalingPolicy("Percent", 100, 15),), "Max")
    h = HPA(min_replicas=1, max_replicas=100, scale_up=up, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 10, [1.0]) == 10
    assert h.step(60, 10, [2.0]) == 10  # lowest in window is 10
    assert h.step(121, 10, [2.0]) == 20  # the 10 at t=0 aged out


def test_default_scale_up_allows_4_pods_or_100_percent_per_15s():
    h = HPA(min_replicas=1, max_replicas=1000, scale_up=DEFAULT_SCALE_UP)
    assert h.step(0, 1, [50.0]) == 5  # max(1 + 4, 1 * 2)
    h = HPA(min_replicas=1, max_replicas=1000, scale_up=DEFAULT_SCALE_UP)
    assert h.step(0, 10, [50.0]) == 20  # max(10 + 4, 10 * 2)


def test_scale_down_policies_worked_example():
    # docs: Pods 4 / 60 s and Percent 10 / 60 s, selectPolicy Max (the default):
    # "if there are 80 replicas and the target has to be scaled down to 10 replicas then during the first step
    #  8 replicas will be reduced. In the next iteration when the number of replicas is 72, 10% of the pods is
    #  7.2 but the number is rounded up to 8."
    down = ScalingRules(0, (ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60)), "Max")
    h = HPA(min_replicas=1, max_replicas=100, scale_down=down, sync_seconds=60)
    cur, seq = 80, []
    for i in range(6):
        cur = h.step(60 * i, cur, [10 / cur], step_seconds=60)
        seq.append(cur)
    assert seq[:2] == [72, 64]
    # below 40 replicas the Pods policy (4) allows the larger change
    while cur > 40:
        cur = h.step(60 * len(seq), cur, [10 / cur], step_seconds=60)
        seq.append(cur)
    nxt = h.step(60 * len(seq), cur, [10 / cur], step_seconds=60)
    assert cur - nxt == 4


def test_select_policy_min_and_disabled():
    down = ScalingRules(0, (ScalingPolicy("Pods", 4, 60), ScalingPolicy("Percent", 10, 60)), "Min")
    h = HPA(min_replicas=1, max_replicas=100, scale_down=down)
    assert h.step(0, 80, [10 / 80], step_seconds=60) == 76  # the smaller change: 4 pods
    off = ScalingRules(0, (ScalingPolicy("Percent", 100, 15),), "Disabled")
    h = HPA(min_replicas=1, max_replicas=100, scale_down=off)
    assert h.step(0, 80, [0.1]) == 80


def test_rate_limit_counts_changes_within_period():
    up = ScalingRules(0, (ScalingPolicy("Pods", 2, 300),), "Max")
    h = HPA(min_replicas=1, max_replicas=100, scale_up=up, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 10, [3.0], step_seconds=60) == 12
    assert h.step(60, 12, [3.0], step_seconds=60) == 12  # 2 pods already added in the last 300 s
    assert h.step(301, 12, [3.0], step_seconds=60) == 14


def test_a_step_longer_than_the_sync_holds_its_recommendation_until_the_next_step():
    # 5-minute data, replayed once per step: the controller syncing every 15 s keeps recommending 10
    # until 285 s, inside a 300 s scale-down window at 300 s, so the scale-down waits one more step
    h = HPA(min_replicas=1, max_replicas=100)
    assert h.step(0, 10, [1.0], 300) == 10
    assert h.step(300, 10, [0.5], 300) == 10  # recommended at 285 s: still within (0, 300]
    assert h.step(600, 10, [0.5], 300) == 5
    # one call per sync (the default step) keeps the controller's own timing
    h = HPA(min_replicas=1, max_replicas=100)
    assert h.step(0, 10, [1.0]) == 10
    assert h.step(300, 10, [0.5]) == 5
    # a 0 s window never looks back, whatever the step
    h = HPA(min_replicas=1, max_replicas=100, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 10, [1.0], 300) == 10
    assert h.step(300, 10, [0.5], 300) == 5


def test_rate_limit_compounds_over_a_step_longer_than_its_period():
    # Pods 1 per 60 s on a 300 s step: five consecutive periods of steady metric pass before the
    # next evaluation, each allowing one more pod: 3 -> 8 (a single period would allow 3 -> 4)
    one_pod = ScalingRules(0, (ScalingPolicy("Pods", 1, 60),), "Max")
    h = HPA(min_replicas=1, max_replicas=100, scale_up=one_pod, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 3, [20 / 3], step_seconds=300) == 8
    # the default rules (Percent 100 and Pods 4 per 15 s, Max) on a 60 s step: four syncs,
    # Percent doubles 2 -> 4 -> 8 -> 16 -> 32, so the wanted 20 is reached (one sync: max(2 + 4, 4) = 6)
    h = HPA(min_replicas=1, max_replicas=100, scale_up=DEFAULT_SCALE_UP, scale_down=NO_WINDOW_DOWN)
    assert h.step(0, 2, [10.0], step_seconds=60) == 20
    # and down: Pods 2 per 60 s on a 180 s step: three periods, 10 -> 4 (a single period: 8)
    two_down = ScalingRules(0, (ScalingPolicy("Pods", 2, 60),), "Max")
    h = HPA(min_replicas=1, max_replicas=100, scale_down=two_down)
    assert h.step(0, 10, [0.1], step_seconds=180) == 4
