"""The What-if page offers every value a training policy can hold, so any recommended policy
(the empirical peer's ``n95`` top-up and ``empirical`` daily rule included) can be shown."""

from __future__ import annotations

from typing import get_args

import pytest

from capplan.backtest.whatif import DAILY_RULES, QUANTILE_CHOICES, TOPUP_CHOICES
from optimizer.plan.policy import TrainingParams
from optimizer.rivals.peers import EMPIRICAL_PARAMS


@pytest.mark.parametrize("field, offered", [("topup_quantile", TOPUP_CHOICES), ("quantile", QUANTILE_CHOICES),
                                            ("daily_rule", DAILY_RULES)])
def test_every_accepted_value_is_offered(field, offered):
    assert set(offered) == set(get_args(TrainingParams.model_fields[field].annotation))
    assert len(offered) == len(set(offered))


def test_topups_run_from_none_to_the_highest_level():
    assert TOPUP_CHOICES[0] == "none" and TOPUP_CHOICES[-1] == "p99"
    assert TOPUP_CHOICES.index("c95") < TOPUP_CHOICES.index("n95") < TOPUP_CHOICES.index("p99")


def test_the_empirical_peers_expressed_form_is_on_the_page():
    """The peer the dashboard most often has to show that the scan never picks."""
    assert EMPIRICAL_PARAMS["topup_quantile"] in TOPUP_CHOICES
    assert EMPIRICAL_PARAMS["daily_rule"] in DAILY_RULES
