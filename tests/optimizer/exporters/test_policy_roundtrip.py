"""policy.yaml carries everything a re-render needs: rendering the plans read back from it gives the same files,
the header's recommendation word included (so `capplan export --diff` right after a plan finds no difference)."""

from __future__ import annotations

import yaml

from optimizer.exporters import render_all
from optimizer.exporters.dispatcher_policy import PATH, plans_from_policy
from tests.optimizer.exporters.test_exporters import inference, training


def test_a_re_render_from_policy_yaml_is_identical_with_the_recommendation_word():
    mix = {"reserved": {"gpu_hours": 0.0, "cost_usd": 0.0}, "spot": {"gpu_hours": 90.0, "cost_usd": 150.0},
           "on_demand": {"gpu_hours": 10.0, "cost_usd": 40.0}}
    train = training()
    train = train.model_copy(update={"recommendation": "rule",
                                     "recommended": train.recommended.model_copy(update={"mix": mix})})
    plans = [train,
             inference().model_copy(update={"recommendation": "naive_conformal"})]
    first = render_all(plans)
    assert "(recommendation: rule)" in first[PATH]  # the header's word
    back = plans_from_policy(yaml.safe_load(first[PATH]))
    assert [p.recommendation for p in back] == ["rule", "naive_conformal"]
    assert render_all(back) == first
