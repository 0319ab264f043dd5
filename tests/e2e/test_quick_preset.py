"""The quick preset (capplan/config/quick.py) on a config: what it sets, what it keeps, and what it says."""

from __future__ import annotations

from capplan.config.quick import QUICK, QUICK_MODELS, apply_quick, quick_reductions
from capplan.config.settings import CapplanConfig


def test_quick_sets_the_coarse_settings_and_a_default_config_keeps_the_full_ones():
    default = CapplanConfig()
    assert (default.plan.scan_grid, default.forecast.training_origin_hours, default.forecast.prophet_holdout) == \
        ("full", 4, True)
    assert quick_reductions(default) == []
    cfg = apply_quick(CapplanConfig())
    assert cfg.plan.quick and cfg.plan.scan_grid == "coarse" and not cfg.plan.random_search
    assert default.plan.gp_refine and not cfg.plan.gp_refine
    assert (cfg.plan.tune_days, cfg.plan.eval_days) == (3, 3)
    assert cfg.forecast.training_origin_hours == 12
    assert cfg.forecast.tier_options()["weekly"]["holdout"] is False
    assert default.forecast.tier_options()["weekly"]["holdout"] is True


def test_quick_keeps_smaller_or_sparser_configured_values():
    cfg = CapplanConfig()
    cfg.plan.tune_days, cfg.forecast.lstm_epochs, cfg.forecast.training_origin_hours = 2, 1, 24
    apply_quick(cfg)
    assert (cfg.plan.tune_days, cfg.forecast.lstm_epochs, cfg.forecast.training_origin_hours) == (2, 1, 24)
    assert cfg.plan.eval_days == QUICK["plan"]["eval_days"]


def test_quick_models_live_apart_once_and_remote_registries_keep_their_scheme():
    cfg = apply_quick(apply_quick(CapplanConfig(models="models/")))
    assert cfg.models.replace("\\", "/") == f"models/{QUICK_MODELS}"
    remote = apply_quick(CapplanConfig(models="s3://bucket/models"))
    assert remote.models == f"s3://bucket/models/{QUICK_MODELS}"


def test_every_reduction_names_the_quick_value_and_the_default():
    lines = quick_reductions(apply_quick(CapplanConfig()))
    assert len(lines) == 7
    text = "\n".join(lines)
    for part in ("no Gaussian-process refinement after it (default 30 evaluations)", "the coarse grid", "3-day tuning",
                 "widened to up to 1 complete week(s) before the evaluation window",
                 "every 12 h for training pools (default 4 h)", "1 network(s), 2 epochs",
                 "60 uncertainty samples (default 300)",
                 "no holdout fit", "models: kept in models"):
        assert part in text, part
